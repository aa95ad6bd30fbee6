"""Benchmark: a real agent container's memory on the real node, from its
cgroup (v1 here: memory.usage_in_bytes and memory.stat's total_rss, of the container's
cgroup and of its pod's), idle, after it planned the seed's example once, and under a
stream of tasks (`--tasks N` at `--rate` per second: the highest reading while they are
planned, and the reading once they are done and the agent settled).

Runs the product in-cluster (humanwork_dev.incluster: the chart's release with the node's
values, the fakes) on the control plane of the real-node tests (`.cluster-node/`, started
and given a real node when not running; root). It asserts nothing and leaves the control
plane running (`HUMANWORK_CLUSTER_DIR=.cluster-node .venv/bin/humanwork-node down` and
`... humanwork-cluster down` stop it).

    .venv/bin/python bench/real_node/agent_memory.py [--settle 20] [--tasks 60 --rate 1]
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from humanwork_dev import cluster, incluster, node
from humanwork_dev.fakes.catalog import SEED_REQUEST

STATE = cluster.REPO / ".cluster-node"


def _agent_pod(kubectl: incluster.Kubectl, namespace: str) -> dict[str, Any]:
    pods = kubectl.json(
        "-n", namespace, "get", "pods", "-l", "app.kubernetes.io/name=humanwork-agent"
    )
    pod: dict[str, Any] = next(p for p in pods["items"] if p["status"].get("phase") == "Running")
    return pod


def _plan(http: httpx.Client, org: incluster.Org) -> None:
    r = http.post(f"/orgs/{org.id}/agents/agent/tasks", json={"request": SEED_REQUEST},
                  headers=org.headers["requester"])  # fmt: skip
    r.raise_for_status()


def _mib(figures: dict[str, int]) -> dict[str, float]:
    return {k: round(v / 2**20, 1) for k, v in figures.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--settle", type=float, default=20.0, help="seconds before each reading")
    parser.add_argument("--state-dir", type=Path, default=STATE)
    parser.add_argument("--tasks", type=int, default=60, help="tasks of the stream (0: none)")
    parser.add_argument("--rate", type=float, default=1.0, help="tasks per second")
    args = parser.parse_args()
    info = cluster.up(args.state_dir)
    node.up(args.state_dir)
    kubectl = incluster.Kubectl(info.kubectl, info.kubeconfig)
    deployed = incluster.deploy(kubectl)
    with httpx.Client(
        base_url=deployed.platform_url, timeout=120, verify=deployed.verify()
    ) as http:
        org = incluster.create_org(http, f"mem-{uuid.uuid4().hex[:6]}", deployed.credentials)
        incluster.provision_agent(kubectl, org)
        pod = _agent_pod(kubectl, org.namespace)
        pid = incluster.container_pid(args.state_dir, pod)
        time.sleep(args.settle)
        idle = incluster.cgroup_memory(pid)
        _plan(http, org)
        time.sleep(args.settle)
        planned = incluster.cgroup_memory(pid)
        peak = dict(planned)
        for _ in range(args.tasks):
            _plan(http, org)
            now = incluster.cgroup_memory(pid)
            peak = {k: max(v, now[k]) for k, v in peak.items()}
            time.sleep(1 / args.rate)
        time.sleep(args.settle)
        after = incluster.cgroup_memory(pid)
    limits = pod["spec"]["containers"][0]["resources"]
    figures = {"idle_mib": _mib(idle), "after_one_plan_mib": _mib(planned)}
    if args.tasks:
        figures[f"peak_during_{args.tasks}_tasks_mib"] = _mib(peak)
        figures[f"after_{args.tasks}_tasks_mib"] = _mib(after)
    print(json.dumps({"pod": pod["metadata"]["name"], "resources": limits, **figures}, indent=2))
    kubectl("delete", "namespace", org.namespace, "--wait=false", check=False)


if __name__ == "__main__":
    main()
