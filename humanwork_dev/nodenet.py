"""The real node's network: its addresses (a private /24 that exists only on this machine,
inside GUARDED), the bridge, and the egress guard that keeps every packet of a pod on this
machine (see `guard_up`); also the node's error and how its commands run.

`humanwork_dev.node` starts and stops the node; this module is the part of it that the
guard's own tests (tests/node/test_guard.py) check rule by rule."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from humanwork_dev import cluster

NODE_NAME = "humanwork-node-0"
BRIDGE = "hwnode0"
POD_CIDR = "10.213.0.0/24"
NODE_IP = cluster.REAL_NODE_IP
# every address this module and its tests create is in GUARDED: the pods' /24, the node's
# address, the tests' own listeners; whatever comes from there and is not for the pod
# range or this machine is dropped
GUARDED = "10.213.0.0/16"
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
CNI_BIN = "/usr/lib/cni"


class NodeError(RuntimeError):
    """The real node could not be built, started or reached."""


def run(*args: str, check: bool = True, quiet: bool = False) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        raise NodeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
    if not quiet and done.returncode != 0:
        print(f"node: {' '.join(args)}: {done.stderr.strip()}", file=sys.stderr)
    return done


def node_dir(state: Path) -> Path:
    return state / "node"


# --- network: the bridge and the guard ---------------------------------------------------

GUARD_TABLE = ("inet", "humanwork_guard")
"""The node's own nftables table: nothing else on the machine writes it."""
FORWARD_PRIORITY = -400
"""Before every base chain iptables makes on the forward hook, through either backend
(mangle -150, filter 0, security 50; raw is -300 and not on this hook)."""
OUTPUT_PRIORITY = -90
"""After the DNAT of a Service address in the output hook (nat, -100), so that the packet's
new destination is what is checked; before filter (0)."""
FORWARD_RULE = f"ip saddr {GUARDED} ip daddr != {POD_CIDR} fib daddr type != local counter drop"
OUTPUT_RULE = (
    f"ct status dnat ct original ip daddr {cluster.SERVICE_CIDR} ip daddr != {POD_CIDR} "
    "fib daddr type != local counter drop"
)


def _guard_ruleset() -> str:
    """The table in one nft transaction: declared, deleted and made again, so that `up`
    replaces an old copy atomically (the guard is never absent, never doubled)."""
    family, name = GUARD_TABLE
    return f"""table {family} {name}
delete table {family} {name}
table {family} {name} {{
    chain forward {{
        type filter hook forward priority {FORWARD_PRIORITY}; policy accept;
        {FORWARD_RULE}
    }}
    chain output {{
        type filter hook output priority {OUTPUT_PRIORITY}; policy accept;
        {OUTPUT_RULE}
    }}
}}
"""


FORWARD_SYSCTL = Path("/proc/sys/net/ipv4/ip_forward")


def guard_up(saved: Path | None = None) -> None:
    """Create the bridge and the egress guard (idempotent). The CNI bridge turns on IPv4
    forwarding; its value before is kept in `saved` so that `guard_down` restores it.

    The guard is a base chain of its own nftables table on the forward hook, earlier than
    any chain iptables makes (legacy or nft backend): a drop in any base chain is final
    for the packet, so no rule of kube-proxy, kube-router or anything else, in whichever
    chain, position or backend, can let through what it drops, and no resync moves it."""
    if saved is not None and not saved.exists():
        saved.write_text(FORWARD_SYSCTL.read_text())
    if run("ip", "link", "show", BRIDGE, check=False, quiet=True).returncode != 0:
        run("ip", "link", "add", BRIDGE, "type", "bridge")
        run("ip", "addr", "add", f"{NODE_IP}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    _nft_apply(_guard_ruleset())


def _nft_apply(ruleset: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=ruleset, capture_output=True, text=True,
                          check=False)  # fmt: skip
    if done.returncode != 0:
        raise NodeError(f"nft -f failed ({done.returncode}): {done.stderr.strip()}")


def _base_chains() -> list[dict[str, Any]]:
    """Every nftables base chain of this network namespace (iptables-nft's included)."""
    listed = json.loads(run("nft", "-j", "list", "chains").stdout or "{}")
    chains = [e["chain"] for e in listed.get("nftables", []) if "chain" in e]
    return [c for c in chains if "hook" in c]


def _guard_rules_listed() -> dict[str, list[str]]:
    """The rules of the guard's chains as nft prints them (counters left out)."""
    family, name = GUARD_TABLE
    listed = run("nft", "list", "table", family, name, check=False, quiet=True).stdout
    rules: dict[str, list[str]] = {}
    chain = ""
    for line in (ln.strip() for ln in listed.splitlines()):
        if line.startswith("chain "):
            chain = line.split()[1]
            rules[chain] = []
        elif chain and line and not line.startswith(("type ", "}")):
            words = line.split()
            if "counter" in words:  # "counter packets N bytes M"
                at = words.index("counter")
                words[at + 1 : at + 5] = []
            rules[chain].append(" ".join(words))
    return rules


def guard_holds() -> bool:
    """Whether the guard is in place as `guard_up` made it: its table's forward chain is
    the earliest base chain on the forward hook (no other table's is at or before its
    priority), both chains accept by policy and hold exactly their drop rule."""
    family, name = GUARD_TABLE
    chains = _base_chains()
    ours = {c["name"]: c for c in chains if (c["family"], c["table"]) == (family, name)}
    expected = {"forward": ("forward", FORWARD_PRIORITY), "output": ("output", OUTPUT_PRIORITY)}
    for chain, (hook, prio) in expected.items():
        found = ours.get(chain)
        if not found or (found["hook"], found["prio"], found["policy"]) != (hook, prio, "accept"):
            return False
    others = [c for c in chains if (c["family"], c["table"]) != (family, name)]
    earlier = [c for c in others if c["hook"] == "forward" and c["prio"] <= FORWARD_PRIORITY]
    return not earlier and _guard_rules_listed() == {
        "forward": [FORWARD_RULE], "output": [OUTPUT_RULE]}  # fmt: skip


def guard_down(saved: Path | None = None) -> None:
    if saved is not None and saved.exists():
        FORWARD_SYSCTL.write_text(saved.read_text())
        saved.unlink()
    family, name = GUARD_TABLE
    run("nft", "delete", "table", family, name, check=False, quiet=True)
    run("ip", "link", "del", BRIDGE, check=False, quiet=True)
