"""Benchmark: operator failover, from losing the active replica to the next Ready org.

On a scratch local control plane (CRDs, admission policies and the operator's RBAC
installed), two operator replicas of one shard run as processes under the operator's
ServiceAccount and elect a leader on the shard's Lease. Each round:

1. the ceiling: a new org (namespace + AgentInstance) is created while the leader is alive,
   and timed from creation to `Ready` (what provisioning costs with no failover at all);
2. the leader is lost, either SIGKILLed (a crash: the standby must wait until the Lease's
   record has not changed for the lease duration, as it observes it) or SIGTERMed (a
   rollout: the leader releases the Lease on the way out, and the standby takes it at its
   next try, within the retry period); right after, another new org is
   created, and the bench times the Lease's handover and that org's `Ready`, both from the
   moment the leader was lost;
3. a fresh replica is started as the new standby.

It prints per round and the medians: handover, kill-to-Ready, the ceiling, and the
failover's own cost (kill-to-Ready minus the ceiling of the same round), beside the bound
the settings promise (lease duration + retry for a kill). Run by hand or with `make bench`;
it prints and asserts nothing.

    .venv/bin/python bench/failover.py [--rounds 5] [--lease 15 --renew 10 --retry 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _kit import GROUP, INSTANCES, REPO, VERSION, agent_instance
from kubernetes import client, config

from humanwork_dev import cluster, crdwait
from humanwork_dev.processes import OperatorProcess
from humanwork_dev.shards import (
    SHARD_LABEL,
    StartShard,
    lease,
    lease_env,
    lease_name,
    shard_operators,
)

SHARD = "bench"
LEASE = lease_name(SHARD)


def _until(check: Callable[[], bool], timeout: float = 180.0, interval: float = 0.05) -> float:
    """Poll until `check()` holds; the monotonic time it first did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return time.monotonic()
        time.sleep(interval)
    raise TimeoutError(f"not within {timeout}s")


class Bench:
    """The scratch cluster's clients and the operator replicas of the bench's shard."""

    def __init__(self, info: cluster.ClusterInfo, start: StartShard) -> None:
        self.start = start
        self.api = config.new_client_from_config(config_file=info.kubeconfig)
        self.core = client.CoreV1Api(self.api)
        self.objects = client.CustomObjectsApi(self.api)
        self.replicas: dict[str, OperatorProcess] = {}
        self.count = self.started = 0

    def start_replica(self) -> None:
        identity = f"replica-{self.started}"
        self.started += 1
        self.replicas[identity] = self.start(SHARD, identity)

    def holder(self) -> str:
        try:
            return str(lease(self.api, LEASE)["holder"])
        except client.ApiException:  # no replica made the Lease yet
            return ""

    def new_org(self) -> str:
        """A fresh org of the shard, with its AgentInstance; its namespace."""
        self.count += 1
        ns, org_id = f"fo-{self.count:03d}-{uuid.uuid4().hex[:4]}", str(uuid.uuid4())
        labels = {
            "humanwork.io/org-id": org_id,
            SHARD_LABEL: SHARD,
            "pod-security.kubernetes.io/enforce": "restricted",
        }
        self.core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=ns, labels=labels))
        )
        self.core.create_namespaced_secret(
            ns,
            client.V1Secret(
                metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": "sk-bench"}
            ),
        )
        self.objects.create_namespaced_custom_object(
            GROUP, VERSION, ns, INSTANCES, agent_instance(ns, org_id)
        )
        return ns

    def ready(self, ns: str) -> bool:
        found: dict[str, Any] = self.objects.get_namespaced_custom_object(
            GROUP, VERSION, ns, INSTANCES, "agent"
        )
        return (found.get("status") or {}).get("phase") == "Ready"


def _round(bench: Bench, how: str) -> dict[str, float]:
    """One failover of the leader (`kill` or `term`); the round's figures in seconds."""
    leader_id = bench.holder()
    created = time.monotonic()
    ceiling_ns = bench.new_org()
    ceiling = _until(lambda: bench.ready(ceiling_ns)) - created

    leader = bench.replicas.pop(leader_id)
    lost = time.monotonic()
    if how == "kill":
        leader.kill()
    else:
        leader.stop()
    exited = time.monotonic() - lost
    ns = bench.new_org()
    handover = _until(lambda: bench.holder() not in ("", leader_id)) - lost
    to_ready = _until(lambda: bench.ready(ns)) - lost
    bench.start_replica()
    return {
        "exit": exited,
        "handover": handover,
        "ready": to_ready,
        "ceiling": ceiling,
        "cost": to_ready - ceiling,
    }


def _print_rounds(how: str, rounds: list[dict[str, float]], bound: float) -> None:
    for i, r in enumerate(rounds, 1):
        print(
            f"  {how} {i}: leader gone after {r['exit']:.2f} s, "
            f"handover {r['handover']:.2f} s, lost-to-Ready {r['ready']:.2f} s, "
            f"ceiling (create-to-Ready, live leader) {r['ceiling']:.2f} s, "
            f"failover cost {r['cost']:.2f} s"
        )
    med = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    print(
        f"{how} median of {len(rounds)}: handover {med['handover']:.2f} s "
        f"(bound from the settings: {bound:g} s); "
        f"lost-to-Ready {med['ready']:.2f} s against a ceiling of {med['ceiling']:.2f} s "
        f"(failover cost {med['cost']:.2f} s)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lease", type=int, default=15, help="lease duration, seconds")
    parser.add_argument("--renew", type=int, default=10, help="renew deadline, seconds")
    parser.add_argument("--retry", type=int, default=2, help="retry period, seconds")
    args = parser.parse_args()
    env = lease_env(args.lease, args.renew, args.retry)
    with tempfile.TemporaryDirectory(prefix="hw-bench-failover-") as tmp:
        state = Path(tmp) / "cluster"
        info = cluster.up(state)
        try:
            _install(info)
            with shard_operators(info.kubeconfig, info.kubectl, Path(tmp), env) as start:
                bench = Bench(info, start)
                try:
                    _run(bench, args)
                except Exception:
                    for identity, proc in bench.replicas.items():
                        exit_code = proc.proc and proc.proc.poll()
                        print(f"--- {identity} (exit {exit_code}):\n{proc.tail(30)}")
                    raise
        finally:
            cluster.down(state)


def _install(info: cluster.ClusterInfo) -> None:
    def kubectl(*a: str) -> None:
        subprocess.run(
            [info.kubectl, "--kubeconfig", info.kubeconfig, *a], check=True, capture_output=True
        )

    kubectl("apply", "-k", str(REPO / "crds"))
    crdwait.wait_established(info.kubectl, info.kubeconfig)
    kubectl("apply", "-k", str(REPO / "manifests/base/policies"))
    kubectl("apply", "-k", str(REPO / "manifests/base/operator"))
    time.sleep(2)  # let the admission policies become active


def _run(bench: Bench, args: argparse.Namespace) -> None:
    bench.start_replica()
    bench.start_replica()
    _until(lambda: bench.holder() != "", timeout=60)
    warm = bench.new_org()  # the first org pays for the leader's caches and the node
    _until(lambda: bench.ready(warm))
    print(
        f"lease {args.lease} s, renew deadline {args.renew} s, retry {args.retry} s; "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    for how, bound in (("kill", float(args.lease + args.retry)), ("term", float(args.retry))):
        rounds = [_round(bench, how) for _ in range(args.rounds)]
        _print_rounds(how, rounds, bound)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
