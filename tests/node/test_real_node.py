"""A real node beside kwok (issue 13, item 2): containers really run there under the
`restricted` profile, NetworkPolicy is really enforced (kube-router), and no packet from a
pod leaves the machine (the node's egress guard). Attacks use pods and listeners of our
own only; each refusal has a positive control against the same target."""

from __future__ import annotations

import ipaddress
import json
import shlex
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from humanwork_dev import node
from tests.conftest import Cluster
from tests.node.conftest import (
    NODE_STATE,
    connects,
    container_pid,
    eventually,
    pod_manifest,
    unique,
)

pytestmark = pytest.mark.cluster

AGENT_IMAGE = "humanwork/agent:0.1.0"
SERVE = ["python", "-m", "http.server", "8080", "--bind", "0.0.0.0"]
PAUSE = node.PAUSE_IMAGE


def _server(name: str) -> dict[str, Any]:
    manifest = pod_manifest(name, AGENT_IMAGE, SERVE, labels={"app": "server"})
    manifest["spec"]["containers"][0]["readinessProbe"] = {
        "tcpSocket": {"port": 8080}, "periodSeconds": 1}  # fmt: skip
    return manifest


def test_a_restricted_pod_runs_as_a_real_container_on_the_real_node(
    real_node: dict[str, Any], restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    ns = restricted_namespace("real")
    pod = run_pod(ns, _server("server"))
    assert pod["spec"]["nodeName"] == node.NODE_NAME
    assert ipaddress.ip_address(pod["status"]["podIP"]) in ipaddress.ip_network(node.POD_CIDR)
    assert pod["status"]["containerStatuses"][0]["containerID"].startswith("containerd://")
    pid = container_pid(pod)
    status = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
        if ":\t" in line
    )  # fmt: skip
    assert status["Uid"].split()[:2] == ["10001", "10001"]
    assert status["NoNewPrivs"].strip() == "1"
    assert status["Seccomp"].strip() == "2"  # RuntimeDefault: a filter, not unconfined
    assert int(status["CapEff"], 16) == 0
    write = subprocess.run(
        ["nsenter", "-t", str(pid), "-m", "-S", "10001", "-G", "10001", "touch", "/pwned"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert write.returncode != 0 and "Read-only file system" in write.stderr, write
    # and the server in it answers from the node's pod network
    assert connects(pid, pod["status"]["podIP"], 8080)


def test_a_default_deny_policy_closes_a_connection_that_was_open(
    cluster: Cluster, real_node: dict[str, Any], restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]],
) -> None:  # fmt: skip
    server_ns, client_ns = restricted_namespace("np-srv"), restricted_namespace("np-cli")
    server = run_pod(server_ns, _server("server"))
    client = run_pod(client_ns, pod_manifest("client", PAUSE))
    ip, pid = server["status"]["podIP"], container_pid(client)
    assert connects(pid, ip, 8080), "positive control: open before any policy"

    deny = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny"},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}  # fmt: skip
    cluster.kubectl("-n", server_ns, "apply", "-f", "-", stdin=json.dumps(deny))
    assert eventually(lambda: not connects(pid, ip, 8080, timeout=1)), "still open after deny"

    allow = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
             "metadata": {"name": "allow-client"},
             "spec": {"podSelector": {"matchLabels": {"app": "server"}},
                      "policyTypes": ["Ingress"],
                      "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                          "kubernetes.io/metadata.name": client_ns}}}],
                          "ports": [{"port": 8080, "protocol": "TCP"}]}]}}  # fmt: skip
    cluster.kubectl("-n", server_ns, "apply", "-f", "-", stdin=json.dumps(allow))
    assert eventually(lambda: connects(pid, ip, 8080, timeout=1)), "allow did not reopen"

    egress = {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
              "metadata": {"name": "deny-egress"},
              "spec": {"podSelector": {}, "policyTypes": ["Egress"]}}  # fmt: skip
    cluster.kubectl("-n", client_ns, "apply", "-f", "-", stdin=json.dumps(egress))
    assert eventually(lambda: not connects(pid, ip, 8080, timeout=1)), "egress deny not enforced"


@pytest.fixture
def outside_listener() -> Iterator[tuple[str, int]]:
    """A TCP listener of our own in a network namespace of our own, at an address outside
    the pod range that is not the host's: what a pod would reach if packets could leave."""
    tag = uuid.uuid4().hex[:6]
    ns, host_if, peer_if = f"hwn-out-{tag}", f"hwo{tag}", f"hwp{tag}"
    addr, port = "10.213.9.2", 18080
    run = lambda *a: subprocess.run(list(a), check=True, capture_output=True)  # noqa: E731
    run("ip", "netns", "add", ns)
    server = None
    try:
        run("ip", "link", "add", host_if, "type", "veth", "peer", "name", peer_if)
        run("ip", "link", "set", peer_if, "netns", ns)
        run("ip", "addr", "add", "10.213.9.1/30", "dev", host_if)
        run("ip", "link", "set", host_if, "up")
        run("ip", "-n", ns, "addr", "add", f"{addr}/30", "dev", peer_if)
        run("ip", "-n", ns, "link", "set", peer_if, "up")
        run("ip", "-n", ns, "link", "set", "lo", "up")
        # a route back to the pods only, no default route: nothing it sends (http.server's
        # reverse lookup of its own address included) can be routed off the machine, and the
        # node's guard drops whatever comes from 10.213.0.0/16 for a non-local address
        run("ip", "-n", ns, "route", "add", node.POD_CIDR, "via", "10.213.9.1")
        server = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, "-m", "http.server", str(port),
             "--bind", addr], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert eventually(lambda: connects(None, addr, port), timeout=10), "listener did not start"
        yield addr, port
    finally:
        if server:
            server.kill()
            server.wait()
        subprocess.run(["ip", "link", "del", host_if], check=False, capture_output=True)
        subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)


def test_no_packet_from_a_pod_leaves_the_pod_range(
    real_node: dict[str, Any], restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]], outside_listener: tuple[str, int],
) -> None:  # fmt: skip
    addr, port = outside_listener
    assert node.guard_holds(), "the guard's table must be in place, before every other chain"
    # the CNI bridge turned forwarding on: the guard, not the sysctl, is what drops below
    assert Path("/proc/sys/net/ipv4/ip_forward").read_text().strip() == "1"
    ns = restricted_namespace("egress")
    server = run_pod(ns, _server("server"))
    client = run_pod(ns, pod_manifest(unique("client"), PAUSE))
    pid = container_pid(client)
    # positive controls: the listener answers the host; the pod reaches its own range
    assert connects(None, addr, port)
    assert connects(pid, server["status"]["podIP"], 8080)
    # no NetworkPolicy here: only the node's guard stands between the pod and the listener
    assert not connects(pid, addr, port, timeout=3)


BACKENDS = ("iptables-nft", "iptables-legacy")
HOSTILE = ["FORWARD", "-s", node.GUARDED, "-j", "ACCEPT"]


def forward_rules(backend: str = "iptables-nft", table: str = "filter") -> list[str]:
    done = subprocess.run([backend, "-t", table, "-S", "FORWARD"], capture_output=True,
                          text=True, check=True)  # fmt: skip
    return done.stdout.splitlines()[1:]


def force_resync(component: str, chain: str) -> None:
    """Take the component's jump out of the host's FORWARD chain, restart the component and
    wait until its start-up sync has put the jump back (the same full resync it does after
    a crash, an upgrade or a flush by someone else)."""
    for line in forward_rules():
        if line.endswith(f"-j {chain}"):
            words = shlex.split(line)
            subprocess.run(["iptables", "-D", *words[1:]], check=True, capture_output=True)
    assert not any(ln.endswith(f"-j {chain}") for ln in forward_rules())
    node.restart(NODE_STATE, component)
    back = eventually(lambda: any(ln.endswith(f"-j {chain}") for ln in forward_rules()), 180)
    assert back, f"{component} did not resync its {chain} jump"


def test_the_guard_holds_after_resyncs_and_a_competing_accept_in_both_backends(
    real_node: dict[str, Any], restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]], outside_listener: tuple[str, int],
) -> None:  # fmt: skip
    """kube-proxy and kube-router restarted (each rebuilds its chains and jumps), then an
    ACCEPT of the pod range put first in mangle and filter FORWARD through both iptables
    backends, as a hostile component would: the pod's packet to a listener outside the pod
    range is still dropped and the node's guard check still passes. (Main's guard, a jump
    from the iptables-nft FORWARD chains, is skipped by the ACCEPT before it.)"""
    addr, port = outside_listener
    ns = restricted_namespace("resync")
    server = run_pod(ns, _server("server"))
    client = run_pod(ns, pod_manifest(unique("client"), PAUSE))
    pid = container_pid(client)
    force_resync("kube-proxy", "KUBE-FORWARD")
    force_resync("kube-router", "KUBE-ROUTER-FORWARD")
    inserted: list[tuple[str, str]] = []
    try:
        for backend in BACKENDS:
            for table in ("mangle", "filter"):
                subprocess.run([backend, "-t", table, "-I", *HOSTILE[:1], "1", *HOSTILE[1:]],
                               check=True, capture_output=True)  # fmt: skip
                inserted.append((backend, table))
                assert forward_rules(backend, table)[0] == "-A " + " ".join(HOSTILE)
        assert node.guard_holds()
        # positive controls: the host reaches the listener, the pod reaches its own range
        assert connects(None, addr, port)
        assert connects(pid, server["status"]["podIP"], 8080)
        assert not connects(pid, addr, port, timeout=3), "a packet left the pod range"
    finally:
        for backend, table in inserted:
            subprocess.run([backend, "-t", table, "-D", *HOSTILE], check=False)


def test_inside_the_container_the_agent_writes_only_where_its_volumes_allow(
    cluster: Cluster,
    real_node: dict[str, Any],
    restricted_namespace: Callable[[str], str],
    run_pod: Callable[..., dict[str, Any]],
) -> None:
    ns = restricted_namespace("sandbox")
    manifest = _server("agent")
    manifest["spec"]["containers"][0]["volumeMounts"] = [{"name": "tmp", "mountPath": "/tmp"}]
    manifest["spec"]["volumes"] = [{"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}]
    run_pod(ns, manifest)
    probe = (
        "import os, pathlib\n"
        "status = dict(l.split(':\\t', 1) for l in open('/proc/self/status') if ':\\t' in l)\n"
        "print('uid', os.getuid(), os.getgid())\n"
        "print('nnp', status['NoNewPrivs'].strip(), 'capeff', status['CapEff'].strip())\n"
        "for path in ('/tmp/ok', '/pwned', '/opt/humanwork/pwned', '/etc/pwned'):\n"
        "    try:\n"
        "        pathlib.Path(path).write_text('x'); print('wrote', path)\n"
        "    except OSError as exc:\n"
        "        print('refused', path, exc.strerror)\n"
    )
    out = cluster.kubectl("-n", ns, "exec", "agent", "--", "python", "-c", probe).stdout
    lines = out.splitlines()
    assert lines[0] == "uid 10001 10001"
    assert lines[1] == "nnp 1 capeff 0000000000000000"
    assert lines[2] == "wrote /tmp/ok"  # the emptyDir volume: the one writable place
    for line in lines[3:]:
        assert line.startswith("refused ") and line.endswith("Read-only file system"), line
