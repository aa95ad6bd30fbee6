"""The operator's leader killed (SIGKILL) mid-provisioning and mid-rotation, while three
experts approve a dozen writes of the world's org.

Two replicas of a shard of the test's own serve the world's org namespace (relabelled for
the test) and an org of the test's own; the first replica is the leader, armed to kill
itself at a named point of a reconcile (`agent_operator.faultpoints`): a new instance's
token minted and its Secret and children applied, the status not yet written; or a
rotated token in the Secret, the status still naming the old one. The test proves the
point was reached from what the API server holds (the Secret's token, the status), then:
the standby leads, the instance converges with one token (the one the dead leader wrote:
an agent that mounted it is never locked out) and no orphaned Secret or Deployment, the
world's invariants hold, and the time to recover is printed.
"""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client

from humanwork_core import tokens
from humanwork_dev.processes import OperatorProcess
from tests.agents import create_instance, get_instance, secret_value
from tests.conftest import Cluster
from tests.faults.conftest import SETTLE_WITHIN, STARTUP, FaultWorld
from tests.fixtures.stack import TOKEN_GRACE_SECONDS
from tests.shards import FAST_LEASE, SHARD_LABEL, lease, shard_operators
from tests.support import eventually

TASKS = 12
ROTATE = "humanwork.io/rotate-token"


@dataclass
class Pair:
    """Two operator replicas of one shard: `armed` leads and dies at its point."""

    shard: str
    armed: OperatorProcess
    standby: OperatorProcess

    @property
    def lease(self) -> str:
        return f"humanwork-operator-{self.shard}"


@contextlib.contextmanager
def serving_pair(world: FaultWorld, point: str, workdir: Path) -> Iterator[Pair]:
    """Start the pair (the armed one first, so that it leads) and give it the world's org;
    afterwards the org goes back to the session's operator."""
    cluster, shard = world.cluster, f"flt-{uuid.uuid4().hex[:6]}"
    grace = {"HUMANWORK_OPERATOR_PREVIOUS_TOKEN_GRACE_SECONDS": str(TOKEN_GRACE_SECONDS)}
    core = client.CoreV1Api(cluster.api)
    with shard_operators(cluster, workdir, {**FAST_LEASE, **grace}, tail=20) as start:
        try:
            armed = start(shard, f"{shard}-a", {"HUMANWORK_TEST_FAULT_POINT": point})
            eventually(lambda: lease(cluster, f"humanwork-operator-{shard}")["holder"], timeout=30)
            standby = start(shard, f"{shard}-b")
            core.patch_namespace(world.namespace, {"metadata": {"labels": {SHARD_LABEL: shard}}})
            yield Pair(shard, armed, standby)
        finally:
            core.patch_namespace(world.namespace, {"metadata": {"labels": {SHARD_LABEL: None}}})


def own_org(world: FaultWorld, make_namespace: Callable[..., str], shard: str) -> str:
    """An org namespace of the pair's shard with the LLM key its instance refers to."""
    org_id = str(uuid.uuid4())
    ns = make_namespace("org", labels={"humanwork.io/org-id": org_id, SHARD_LABEL: shard})
    client.CoreV1Api(world.cluster.api).create_namespaced_secret(
        ns,
        client.V1Secret(metadata=client.V1ObjectMeta(name="llm"), string_data={"api-key": "k"}),
    )
    create_instance(world.cluster, ns, org_id)
    return ns


def secret_jti(cluster: Cluster, ns: str) -> str | None:
    try:
        raw = secret_value(cluster, ns, "agent-agent-token", "token")
    except client.ApiException:
        return None
    return tokens.read_minted_token(raw).claims.jti


def status_token(cluster: Cluster, ns: str) -> dict[str, Any]:
    return dict((get_instance(cluster, ns).get("status") or {}).get("token") or {})


def converged(cluster: Cluster, ns: str) -> dict[str, Any] | None:
    """The instance once `Ready` with the token of its Secret in its status."""
    instance = get_instance(cluster, ns)
    status = instance.get("status") or {}
    token = status.get("token") or {}
    ready = status.get("phase") == "Ready" and token.get("jti") == secret_jti(cluster, ns)
    annotations = (instance.get("metadata") or {}).get("annotations") or {}
    return instance if ready and ROTATE not in annotations else None


def owned_children(cluster: Cluster, ns: str) -> dict[str, list[str]]:
    """The Secrets and Deployments of the namespace an AgentInstance owns, by kind; fails on
    one whose owner is not the namespace's instance (an orphan of a dead reconcile)."""
    uid = get_instance(cluster, ns)["metadata"]["uid"]
    core, apps = client.CoreV1Api(cluster.api), client.AppsV1Api(cluster.api)
    found: dict[str, list[str]] = {"Secret": [], "Deployment": []}
    for kind, items in (
        ("Secret", core.list_namespaced_secret(ns).items),
        ("Deployment", apps.list_namespaced_deployment(ns).items),
    ):
        for obj in items:
            meta = obj.metadata
            assert meta is not None and meta.name
            owners = [o for o in meta.owner_references or [] if o.kind == "AgentInstance"]
            assert all(o.uid == uid for o in owners), (kind, meta.name, owners)
            if owners:
                found[kind].append(meta.name)
    return found


def token_events(cluster: Cluster, ns: str) -> list[str]:
    events = client.CoreV1Api(cluster.api).list_namespaced_event(ns).items
    return [e.reason for e in events if e.reason in ("Provisioned", "TokenIssued", "TokenRotated")]


def leads(pair: Pair, cluster: Cluster, killed: float) -> float:
    """Wait until the standby holds the Lease; the seconds since the kill."""
    standby = f"{pair.shard}-b"
    eventually(lambda: lease(cluster, pair.lease)["holder"] == standby, timeout=60, interval=0.1)
    return time.monotonic() - killed


def approvals_in_flight(world: FaultWorld) -> tuple[list[str], threading.Thread]:
    names = world.create_tasks(TASKS)
    experts = world.approvals_in_flight(names)
    return names, experts


def test_the_operator_leader_killed_mid_provisioning_hands_over_with_one_token(
    fresh: FaultWorld, make_namespace: Callable[..., str], tmp_path: Path
) -> None:
    world, cluster = fresh, fresh.cluster
    with serving_pair(world, "provision.before_status_write", tmp_path) as pair:
        names, experts = approvals_in_flight(world)
        ns = own_org(world, make_namespace, pair.shard)
        assert pair.armed.proc is not None
        assert pair.armed.proc.wait(120) == -9  # died at its point
        killed = time.monotonic()
        minted = secret_jti(cluster, ns)  # the point, from the API server: a token minted,
        assert minted and not status_token(cluster, ns)  # its status not written
        handover = leads(pair, cluster, killed)
        instance = eventually(lambda: converged(cluster, ns), timeout=SETTLE_WITHIN)
        print(f"\n[faults] operator leader killed mid-provisioning: handover {handover:.1f} s, ")
        print(f"Ready with its token {time.monotonic() - killed:.1f} s after the kill")
        token = instance["status"]["token"]
        assert token["jti"] == minted, token  # the dead leader's token adopted: one token
        assert not token.get("previousJti"), token
        # the operator posts its Events after the status write that `converged` reads
        eventually(lambda: "Provisioned" in token_events(cluster, ns), timeout=30)
        assert "TokenRotated" not in token_events(cluster, ns)
        children = owned_children(cluster, ns)
        assert children["Deployment"] == ["agent-agent"], children
        assert children["Secret"].count("agent-agent-token") == 1, children
        experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(killed, "operator leader killed mid-provisioning")


def test_the_operator_leader_killed_mid_rotation_keeps_the_rotated_token(
    fresh: FaultWorld, make_namespace: Callable[..., str], tmp_path: Path
) -> None:
    world, cluster = fresh, fresh.cluster
    with serving_pair(world, "rotation.before_status_write", tmp_path) as pair:
        ns = own_org(world, make_namespace, pair.shard)
        old = eventually(lambda: converged(cluster, ns), timeout=SETTLE_WITHIN)
        old_jti = old["status"]["token"]["jti"]
        names, experts = approvals_in_flight(world)
        client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
            "humanwork.io",
            "v1alpha1",
            ns,
            "agentinstances",
            "agent",
            {"metadata": {"annotations": {ROTATE: "fault"}}},
        )
        assert pair.armed.proc is not None
        assert pair.armed.proc.wait(120) == -9  # died at its point
        killed = time.monotonic()
        rotated = secret_jti(cluster, ns)  # the point: a new token in the Secret, the
        assert rotated and rotated != old_jti  # status still naming the old one
        assert status_token(cluster, ns)["jti"] == old_jti
        handover = leads(pair, cluster, killed)
        instance = eventually(lambda: converged(cluster, ns), timeout=SETTLE_WITHIN)
        print(f"\n[faults] operator leader killed mid-rotation: handover {handover:.1f} s, ")
        print(f"rotation done {time.monotonic() - killed:.1f} s after the kill")
        token = instance["status"]["token"]
        # the token the dead leader wrote is the one: an agent that mounted it is accepted,
        # and the old one keeps its grace for the agents that have not yet
        assert token["jti"] == rotated, (token, old_jti)
        assert token.get("previousJti") == old_jti, token
        # the operator posts its Events after the status write that `converged` reads
        eventually(lambda: "TokenRotated" in token_events(cluster, ns), timeout=30)
        assert token_events(cluster, ns).count("TokenRotated") == 1
        children = owned_children(cluster, ns)
        assert children["Deployment"] == ["agent-agent"], children
        assert children["Secret"].count("agent-agent-token") == 1, children
        experts.join(STARTUP + SETTLE_WITHIN)
    assert {a.task for a in world.answered} >= set(names)
    world.check(killed, "operator leader killed mid-rotation")
