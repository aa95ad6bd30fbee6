"""The operator's pure decisions: when to mint, what the status says, what counts as drift."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from agent_operator import builders
from agent_operator import reconcile as rc
from humanwork_core import tokens
from humanwork_core.resources import AgentInstance, TokenStatus
from tests.unit.test_builders import NOW, SETTINGS, manifest


def keyring(*keys: tokens.SigningKey) -> rc.Keyring:
    key = keys[0] if keys else tokens.generate_signing_key()
    return rc.Keyring(current=key, published=keys or (key,))


def mint(key: tokens.SigningKey, ttl: int = 86400, at: Any = NOW) -> tokens.MintedToken:
    return tokens.mint_agent_token(
        key,
        agent_id="org-acme/acme",
        org_id=manifest()["spec"]["orgId"],
        namespace="org-acme",
        ttl_seconds=ttl,
        now=at,
    )


def instance(annotations: dict[str, str] | None = None, **spec: Any) -> AgentInstance:
    body = manifest(**spec)
    body["metadata"]["annotations"] = annotations or {}
    return AgentInstance.model_validate(body)


def test_a_missing_token_is_issued_and_a_current_one_kept() -> None:
    ring = keyring()
    assert rc.plan_token(instance(), None, ring, NOW) == rc.TokenPlan(True, "Issued")
    stored = mint(ring.current)
    later = NOW + timedelta(hours=1)
    assert rc.plan_token(instance(), stored, ring, later) == rc.TokenPlan(False, "Current")


def test_rotation_is_due_before_expiry_and_on_request() -> None:
    ring = keyring()
    stored = mint(ring.current)
    inst = instance()
    due = NOW + timedelta(seconds=86400 - inst.spec.token.rotate_before_seconds)
    assert rc.plan_token(inst, stored, ring, due).reason == "RotationDue"
    # the jitter moves the due time earlier, never later, and by at most 10 % of the wait
    assert not rc.plan_token(inst, stored, ring, due - timedelta(hours=9)).mint
    asked = instance(annotations={"humanwork.io/rotate-token": "now"})
    assert rc.plan_token(asked, stored, ring, NOW).reason == "RotationRequested"


def test_a_token_signed_by_a_retired_key_is_replaced() -> None:
    old, new = tokens.generate_signing_key(), tokens.generate_signing_key()
    plan = rc.plan_token(instance(), mint(old), keyring(new), NOW)
    assert plan == rc.TokenPlan(True, "SigningKeyRetired")


def test_rotation_keeps_the_previous_jti_for_a_short_grace() -> None:
    ring = keyring()
    inst = instance()
    first = mint(ring.current)
    previous = rc.token_status(inst, first, None, rotated=False, now=NOW, grace_seconds=60)
    assert previous.previous_jti is None
    at = NOW + timedelta(hours=23)
    second = mint(ring.current, at=at)
    status = rc.token_status(inst, second, previous, rotated=True, now=at, grace_seconds=60)
    assert status.jti == second.claims.jti and status.previous_jti == first.claims.jti
    # grace: the operator's setting (about a minute), never past the old token's own expiry
    assert status.previous_grace_ends_at == min(at + timedelta(seconds=60), previous.expires_at)
    # a later reconcile without rotation keeps the grace record
    again = rc.token_status(
        inst, second, status, rotated=False, now=at + timedelta(seconds=30), grace_seconds=60
    )
    assert again.previous_jti == first.claims.jti


def test_a_revocation_mints_a_new_token_and_leaves_no_grace() -> None:
    ring = keyring()
    inst = instance()
    first = mint(ring.current)
    revoking = inst.model_copy(deep=True)
    revoking.metadata.annotations["humanwork.io/revoke-token"] = "admin"
    assert rc.plan_token(revoking, first, ring, NOW) == rc.TokenPlan(True, "Revoked")
    previous = rc.token_status(inst, first, None, rotated=False, now=NOW, grace_seconds=60)
    second = mint(ring.current, at=NOW + timedelta(minutes=1))
    status = rc.token_status(
        inst, second, previous, rotated=True, now=NOW, grace_seconds=60, revoked=True
    )
    assert status.jti == second.claims.jti
    assert status.previous_jti is None and status.previous_grace_ends_at is None
    assert set(rc.revoked_tokens(previous, first, NOW)) == {first.claims.jti}


def test_only_a_child_controlled_by_this_very_instance_is_adopted() -> None:
    inst = instance()
    ours = {"metadata": {"ownerReferences": [builders.owner_reference(inst)]}}
    assert builders.owned_by(ours, inst)
    stale = {"metadata": {"ownerReferences": [{**builders.owner_reference(inst), "uid": "old"}]}}
    assert not builders.owned_by(stale, inst)  # a deleted instance of the same name
    assert not builders.owned_by({"metadata": {}}, inst)  # planted, no owner
    assert not builders.owned_by(None, inst)


def _status(inst: AgentInstance, deployment: dict[str, Any] | None) -> Any:
    token = TokenStatus(
        kid="k", jti="j", issued_at=NOW, expires_at=NOW + timedelta(days=1), secret_name="s"
    )
    return rc.derive_status(inst, token=token, deployment=deployment, settings=SETTINGS, now=NOW)


def test_status_follows_the_deployment_and_pause() -> None:
    starting = _status(instance(replicas=2), {"status": {"replicas": 2, "readyReplicas": 1}})
    assert starting.phase == "Provisioning"
    ready = _status(instance(replicas=2), {"status": {"replicas": 2, "readyReplicas": 2}})
    assert ready.phase == "Ready" and ready.ready_replicas == 2
    conditions = {c.type: c for c in ready.conditions}
    assert set(conditions) == {"Ready", "TokenValid", "NetworkIsolated", "ConfigApplied"}
    assert conditions["Ready"].status == "True"
    assert conditions["ConfigApplied"].status == "Unknown"  # until the agent acknowledges
    config_hash = ready.config_hash
    acked = instance(annotations={"humanwork.io/config-applied": config_hash}, replicas=2)
    applied = {c.type: c for c in _status(acked, None).conditions}["ConfigApplied"]
    assert (applied.status, applied.reason) == ("True", "AgentAcknowledged")
    stale = instance(annotations={"humanwork.io/config-applied": "0" * 64}, replicas=2)
    assert {c.type: c for c in _status(stale, None).conditions}["ConfigApplied"].status == (
        "Unknown"
    )
    paused = _status(instance(paused=True), {"status": {}})
    assert paused.phase == "Paused"
    assert {c.type: c.reason for c in paused.conditions}["Ready"] == "Paused"


def test_readiness_changes_only_the_counts_phase_and_ready_condition() -> None:
    from agent_operator.instance_status import readiness_status

    starting = _status(instance(replicas=2), {"status": {"replicas": 2, "readyReplicas": 1}})
    body = manifest(replicas=2)
    body["status"] = rc.dump_status(starting)
    later = NOW + timedelta(minutes=1)
    ready = readiness_status(
        AgentInstance.model_validate(body), {"status": {"replicas": 2, "readyReplicas": 2}}, later
    )
    assert (ready.phase, ready.replicas, ready.ready_replicas) == ("Ready", 2, 2)
    by_type = {c.type: c for c in ready.conditions}
    assert (by_type["Ready"].status, by_type["Ready"].last_transition_time) == ("True", later)
    assert by_type["Ready"].message == "2/2 agent replicas ready"
    # everything else as the full reconcile reported it
    kept = ready.model_copy(update={"phase": starting.phase, "ready_replicas": 1})
    assert kept.model_copy(update={"conditions": starting.conditions}) == starting
    assert [c for c in ready.conditions if c.type != "Ready"] == [
        c for c in starting.conditions if c.type != "Ready"
    ]
    paused = manifest(replicas=2, paused=True)
    paused["status"] = rc.dump_status(starting)
    assert readiness_status(AgentInstance.model_validate(paused), {}, later).phase == "Paused"


def test_a_change_of_the_pod_count_alone_is_told_apart() -> None:
    from agent_operator.instance_status import counts_only, readiness_status

    body = manifest(replicas=1)
    body["status"] = rc.dump_status(_status(instance(replicas=1), {"status": {}}))
    provisioned = AgentInstance.model_validate(body)
    later = NOW + timedelta(seconds=3)

    def after(replicas: int, ready: int) -> dict[str, Any]:
        counts = {"status": {"replicas": replicas, "readyReplicas": ready}}
        return rc.dump_status(readiness_status(provisioned, counts, later))

    before = body["status"]
    assert before["replicas"] == 0 and before["phase"] == "Provisioning"
    # a pod created, not yet Ready: only the count moved (the Ready message counts ready pods)
    assert counts_only(before, after(1, 0))
    # the pod Ready: phase, ready count and condition move too; nothing moved: no change
    assert not counts_only(before, after(1, 1))
    assert not counts_only(before, after(0, 0))
    assert not counts_only(before, {**after(1, 0), "endpoint": "elsewhere"})


def test_refusal_keeps_what_was_there_and_says_why() -> None:
    status = rc.refused_status(instance(), "OrgMismatch", "labels differ", NOW)
    ready = next(c for c in status.conditions if c.type == "Ready")
    assert (status.phase, ready.status, ready.reason) == ("Failed", "False", "OrgMismatch")


def test_rotation_countdown_comes_from_the_recorded_token() -> None:
    body = manifest()
    assert rc.seconds_until_rotation(body, NOW) is None
    body["status"] = {
        "token": {
            "kid": "k",
            "jti": "j",
            "issuedAt": NOW.isoformat(),
            "expiresAt": (NOW + timedelta(seconds=300)).isoformat(),
            "secretName": "s",
        }
    }
    body["spec"]["token"] = {"ttlSeconds": 300, "rotateBeforeSeconds": 290}
    wait = rc.seconds_until_rotation(body, NOW)
    assert wait is not None and 9 <= wait <= 10
    assert rc.seconds_until_rotation(body, NOW + timedelta(seconds=20)) == 0


def test_hand_edits_are_told_apart_from_the_controllers_writes() -> None:
    def child(kind: str, *managers: tuple[str, str | None]) -> dict[str, Any]:
        fields = [{"manager": m, "subresource": sub} for m, sub in managers]
        return {"kind": kind, "metadata": {"managedFields": fields}}

    ours = ("humanwork-operator", None)
    assert rc.foreign_writers(child("Service", ours)) == set()
    assert rc.foreign_writers(child("Service", ours, ("kubectl-edit", None))) == {"kubectl-edit"}
    kcm = ("kube-controller-manager", None)
    status = ("kube-controller-manager", "status")
    assert rc.foreign_writers(child("Deployment", ours, kcm, status)) == set()
    assert rc.foreign_writers(child("Deployment", ours, ("kubectl", None))) == {"kubectl"}


def test_the_applied_cache_tells_unchanged_manifests_and_forgets_per_owner() -> None:
    a = {"kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [1]}}
    b = {"kind": "Service", "metadata": {"name": "x"}, "spec": {"ports": [2]}}
    assert rc.manifest_digest(a) == rc.manifest_digest(dict(reversed(list(a.items()))))
    assert rc.manifest_digest(a) != rc.manifest_digest(b)
    cache = rc.AppliedCache()
    cache.setdefault(("ns", "one"), {})[("Service", "x")] = rc.manifest_digest(a)
    cache.setdefault(("ns", "two"), {})[("Service", "y")] = rc.manifest_digest(b)
    cache.forget("ns", "one")
    assert list(cache) == [("ns", "two")]


def test_the_deployment_is_picked_by_its_kind_and_a_missing_one_is_a_clear_error() -> None:
    children = builders.children(instance(), SETTINGS, mint(keyring().current), "callback")
    first, deployment = rc.split_deployment(children)
    assert deployment["kind"] == "Deployment"
    assert first == [child for child in children if child is not deployment]
    # not last: still the Deployment, the others in their order
    moved = [deployment, *first]
    assert rc.split_deployment(moved) == (first, deployment)
    with pytest.raises(ValueError, match=r"one Deployment among the children, got \['Service"):
        rc.split_deployment([c for c in children if c["kind"] != "Deployment"][-1:])
    with pytest.raises(ValueError, match="one Deployment"):
        rc.split_deployment([*children, deployment])


def recorded(token: tokens.MintedToken) -> dict[str, Any]:
    claims = token.claims
    return {
        "kid": claims.kid,
        "jti": claims.jti,
        "issuedAt": claims.issued_at.isoformat(),
        "expiresAt": claims.expires_at.isoformat(),
        "secretName": "s",
    }


def test_a_rotated_token_whose_status_write_was_lost_is_adopted_not_minted_again() -> None:
    """A leader killed between the Secret and the status of a rotation: the next leader
    finds a token the status does not name, and takes it as that rotation."""
    ring = keyring()
    old, new = mint(ring.current), mint(ring.current, at=NOW + timedelta(minutes=1))
    body = manifest()
    body["metadata"]["annotations"] = {"humanwork.io/rotate-token": "now"}
    body["status"] = {"token": recorded(old)}
    inst = AgentInstance.model_validate(body)
    assert rc.plan_token(inst, new, ring, NOW) == rc.TokenPlan(False, "RotationRecovered")
    # the token the status names, with no rotation pending: kept; asked again: rotated
    body["status"] = {"token": recorded(new)}
    assert rc.plan_token(AgentInstance.model_validate(body), new, ring, NOW).reason == (
        "RotationRequested"
    )
    body["metadata"]["annotations"] = {}
    assert not rc.plan_token(AgentInstance.model_validate(body), new, ring, NOW).mint
