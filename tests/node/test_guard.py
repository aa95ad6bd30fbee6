"""The node's egress guard (humanwork_dev.node.guard_up) against what other components do
to the firewall, in a network namespace of the test's own that plays the node: the guard's
bridge with the node's address, a "pod" namespace on it, and a listener of ours outside
the pod range behind a veth of ours. Whatever the test does to iptables there (a hostile
ACCEPT first in FORWARD through both backends, every chain flushed, a full
iptables-restore as kube-proxy makes one) touches only that namespace, and every packet
stays in namespaces the test created.

Each refusal has its positive control: the same listener reached from the "node" itself,
and from the "pod" once the guard is down (so the topology really forwards, and the guard
is what drops)."""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from humanwork_dev import node
from tests.node.conftest import eventually

LISTENER, PORT = "10.213.9.2", 18080
POD_IP = "10.213.0.20"
BACKENDS = ("iptables-nft", "iptables-legacy")


@dataclass
class Topology:
    """The namespaces: `node` (forwarding, the guard's bridge), `pod`, `outside`."""

    node: str
    pod: str
    outside: str

    def run(self, ns: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["ip", "netns", "exec", ns, *args], capture_output=True,
                              text=True, check=check, timeout=60)  # fmt: skip

    def guard(self, call: str) -> str:
        """Call humanwork_dev.node in the node namespace; what it printed."""
        code = f"from humanwork_dev import node\nprint({call})"
        return self.run(self.node, sys.executable, "-c", code).stdout.strip()

    def reaches(self, ns: str) -> bool:
        code = (
            "import socket,sys\n"
            f"try: socket.create_connection(({LISTENER!r},{PORT}),timeout=2).close()\n"
            "except OSError: sys.exit(1)\n"
        )
        return self.run(ns, sys.executable, "-c", code, check=False).returncode == 0


def sh(*args: str) -> None:
    subprocess.run(list(args), check=True, capture_output=True)


@pytest.fixture
def topology() -> Iterator[Topology]:
    tag = uuid.uuid4().hex[:6]
    t = Topology(f"hwg-node-{tag}", f"hwg-pod-{tag}", f"hwg-out-{tag}")
    server = None
    try:
        for ns in (t.node, t.pod, t.outside):
            sh("ip", "netns", "add", ns)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
        t.guard("node.guard_up()")  # the bridge hwnode0 with the node's address, the guard
        sh("ip", "netns", "exec", t.node, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "-n", t.node, "link", "add", "pod0", "type", "veth", "peer", "name", "eth0",
           "netns", t.pod)  # fmt: skip
        sh("ip", "-n", t.node, "link", "set", "pod0", "master", node.BRIDGE, "up")
        sh("ip", "-n", t.pod, "addr", "add", f"{POD_IP}/24", "dev", "eth0")
        sh("ip", "-n", t.pod, "link", "set", "eth0", "up")
        sh("ip", "-n", t.pod, "route", "add", "default", "via", node.NODE_IP)
        sh("ip", "-n", t.node, "link", "add", "out0", "type", "veth", "peer", "name", "eth0",
           "netns", t.outside)  # fmt: skip
        sh("ip", "-n", t.node, "addr", "add", "10.213.9.1/30", "dev", "out0")
        sh("ip", "-n", t.node, "link", "set", "out0", "up")
        sh("ip", "-n", t.outside, "addr", "add", f"{LISTENER}/30", "dev", "eth0")
        sh("ip", "-n", t.outside, "link", "set", "eth0", "up")
        sh("ip", "-n", t.outside, "route", "add", node.POD_CIDR, "via", "10.213.9.1")
        server = subprocess.Popen(
            ["ip", "netns", "exec", t.outside, sys.executable, "-m", "http.server", str(PORT),
             "--bind", LISTENER], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        assert eventually(lambda: t.reaches(t.node), timeout=15), "listener did not start"
        yield t
    finally:
        if server:
            server.kill()
            server.wait()
        for ns in (t.node, t.pod, t.outside):  # their links, tables and rules go with them
            subprocess.run(["ip", "netns", "delete", ns], check=False, capture_output=True)


def hostile_accept(t: Topology) -> None:
    """What a hostile (or merely careless) component does: ACCEPT the pod range first in
    the FORWARD chains of mangle and filter, through both iptables backends."""
    for backend in BACKENDS:
        for table in ("mangle", "filter"):
            t.run(t.node, backend, "-t", table, "-I", "FORWARD", "1", "-s", node.GUARDED,
                  "-j", "ACCEPT")  # fmt: skip


def test_the_guard_drops_what_leaves_the_pod_range_and_nothing_else(topology: Topology) -> None:
    t = topology
    assert t.guard("node.guard_holds()") == "True"
    assert t.reaches(t.node), "positive control: the node reaches the listener"
    assert not t.reaches(t.pod), "a packet from the pod range left it"
    t.run(t.node, "nft", "delete", "table", *node.GUARD_TABLE)
    assert t.guard("node.guard_holds()") == "False"
    # positive control: the same packet, without the guard's table, is forwarded (so the
    # guard, not the topology, is what dropped it)
    assert t.reaches(t.pod), "without the guard the pod should reach the listener"
    # and guard_down removes what guard_up made: the table and the bridge, nothing else
    t.guard("node.guard_up()")
    before = t.run(t.node, "nft", "list", "ruleset").stdout
    t.guard("node.guard_down()")
    assert "humanwork_guard" not in t.run(t.node, "nft", "list", "tables").stdout
    assert t.run(t.node, "ip", "link", "show", node.BRIDGE, check=False).returncode != 0
    assert "humanwork_guard" in before


def test_a_competing_accept_first_in_both_backends_does_not_open_the_guard(
    topology: Topology,
) -> None:
    t = topology
    hostile_accept(t)
    for backend in BACKENDS:
        first = t.run(t.node, backend, "-S", "FORWARD").stdout.splitlines()[1]
        assert first == f"-A FORWARD -s {node.GUARDED} -j ACCEPT", (backend, first)
    assert t.guard("node.guard_holds()") == "True"
    assert not t.reaches(t.pod), "an ACCEPT before the guard let a packet leave the pod range"
    assert t.reaches(t.node), "positive control"


def test_a_flush_and_a_full_restore_of_iptables_leave_the_guard_in_place(
    topology: Topology,
) -> None:
    """What kube-proxy's and kube-router's resyncs do at worst: every iptables chain
    flushed, then a whole table restored (iptables-restore, not --noflush) with an ACCEPT
    of the pod range first."""
    t = topology
    for backend in BACKENDS:
        for table in ("mangle", "filter", "nat"):
            t.run(t.node, backend, "-t", table, "-F")
        accept = f"-A FORWARD -s {node.GUARDED} -j ACCEPT"
        restore = f"*filter\n:FORWARD ACCEPT [0:0]\n{accept}\nCOMMIT\n"
        done = subprocess.run(
            ["ip", "netns", "exec", t.node, f"{backend}-restore"],
            input=restore,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 0, done.stderr
    assert t.guard("node.guard_holds()") == "True"
    assert not t.reaches(t.pod), "a restored ruleset let a packet leave the pod range"
    assert t.reaches(t.node), "positive control"


def test_another_base_chain_before_the_guard_fails_the_check(topology: Topology) -> None:
    """The check the node runs at startup (and the tests) is not vacuous: a base chain of
    another table at an earlier priority, or a rule added to the guard's own chain, fail
    it; the guard made again by `guard_up` passes it."""
    t = topology
    t.run(t.node, "nft", "add", "table", "ip", "intruder")
    t.run(t.node, "nft", "add chain ip intruder early { type filter hook forward priority -500; }")
    assert t.guard("node.guard_holds()") == "False"
    t.run(t.node, "nft", "delete", "table", "ip", "intruder")
    assert t.guard("node.guard_holds()") == "True"
    t.run(t.node, "nft", "insert", "rule", "inet", "humanwork_guard", "forward", "accept")
    assert t.guard("node.guard_holds()") == "False"
    assert t.reaches(t.pod), "an accept inside the guard's own chain ends it (the check saw it)"
    t.guard("node.guard_up()")
    assert t.guard("node.guard_holds()") == "True"
    assert not t.reaches(t.pod)
