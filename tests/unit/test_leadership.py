"""The operator's leader election rule and its shards, as pure functions: who may take a
Lease and when, what a renewal writes, which namespaces a shard serves, and when an
AgentInstance's change calls for a reconcile."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from agent_operator.config import OperatorSettings
from agent_operator.leadership import Move, Observation, decide, lease_spec, record_of
from agent_operator.shards import Namespaces, fingerprint, shard_of, trigger_for


def lease(holder: str, renewed: str = "2026-12-01T00:00:00.000000Z", rv: str = "7") -> Any:
    return {
        "metadata": {"resourceVersion": rv},
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "renewTime": renewed},
    }


def test_an_absent_lease_is_created_and_our_own_is_renewed() -> None:
    assert decide(None, "a", None, 0.0) is Move.CREATE
    assert decide(lease("a"), "a", None, 0.0) is Move.RENEW


def test_a_released_lease_is_taken_at_once() -> None:
    assert decide(lease(""), "b", None, 0.0) is Move.TAKE


def test_a_held_lease_is_taken_only_after_a_whole_duration_without_change_as_observed() -> None:
    held = lease("a")
    seen = Observation(record_of(held), since=100.0)
    assert decide(held, "b", None, 1000.0) is Move.WAIT  # never observed: wait a duration
    assert decide(held, "b", seen, 114.9) is Move.WAIT
    assert decide(held, "b", seen, 115.0) is Move.TAKE


def test_any_renewal_restarts_the_standbys_wait() -> None:
    seen = Observation(record_of(lease("a")), since=100.0)
    renewed = lease("a", renewed="2026-12-01T00:00:02.000000Z", rv="8")
    assert decide(renewed, "b", seen, 500.0) is Move.WAIT
    # the renewTime alone, or the resourceVersion alone, counts as a renewal
    assert decide(lease("a", rv="9"), "b", seen, 500.0) is Move.WAIT
    assert decide(lease("a", renewed="2026-12-01T00:00:03.000000Z"), "b", seen, 500.0) is (
        Move.WAIT
    )


def test_taking_over_counts_a_transition_and_renewing_keeps_the_acquire_time() -> None:
    now = datetime(2026, 12, 1, 3, 4, 5, 678901, tzinfo=UTC)
    old = lease("a")
    old["spec"].update(acquireTime="2026-11-30T00:00:00.000000Z", leaseTransitions=3)
    taken = lease_spec(old, Move.TAKE, "b", 20, now)
    assert taken == {
        "holderIdentity": "b",
        "leaseDurationSeconds": 20,
        "acquireTime": "2026-12-01T03:04:05.678901Z",
        "renewTime": "2026-12-01T03:04:05.678901Z",
        "leaseTransitions": 4,
    }
    mine = lease("b")
    mine["spec"].update(acquireTime="2026-11-30T00:00:00.000000Z", leaseTransitions=4)
    renewed = lease_spec(mine, Move.RENEW, "b", 20, now)
    assert renewed["acquireTime"] == "2026-11-30T00:00:00.000000Z"
    assert renewed["leaseTransitions"] == 4
    assert renewed["renewTime"] == "2026-12-01T03:04:05.678901Z"
    assert lease_spec(None, Move.CREATE, "a", 15, now)["leaseTransitions"] == 0


def test_settings_refuse_a_renew_deadline_a_standby_could_overtake() -> None:
    with pytest.raises(ValueError, match="renew deadline must be below"):
        OperatorSettings.from_env(
            {
                "HUMANWORK_OPERATOR_LEASE_DURATION_SECONDS": "10",
                "HUMANWORK_OPERATOR_LEASE_RENEW_DEADLINE_SECONDS": "10",
            }
        )
    with pytest.raises(ValueError, match="retry must be positive"):
        OperatorSettings.from_env({"HUMANWORK_OPERATOR_LEASE_RETRY_SECONDS": "0"})
    with pytest.raises(ValueError, match="SHARD must be a label value"):
        OperatorSettings.from_env({"HUMANWORK_OPERATOR_SHARD": "a b"})


def test_each_shard_has_its_own_lease_and_an_empty_name_turns_election_off() -> None:
    assert OperatorSettings().lease == "humanwork-operator"
    assert OperatorSettings(shard="eu-1").lease == "humanwork-operator-eu-1"
    assert OperatorSettings(lease_name="").lease == ""


def test_a_namespace_is_served_by_exactly_the_shard_its_label_names() -> None:
    labelled = {"metadata": {"labels": {"humanwork.io/shard": "b"}}}
    assert shard_of(labelled) == "b"
    assert shard_of({"metadata": {"labels": {}}}) == ""
    assert shard_of(None) == ""
    default, shard_b = Namespaces(""), Namespaces("b")
    assert default.serves("") and not default.serves("b")
    assert shard_b.serves("b") and not shard_b.serves("") and not shard_b.serves(None)
    assert shard_b.learn("org-1", "") is None
    assert shard_b.learn("org-1", "b") == ""  # moved in: the shard it had before
    assert shard_b.known("org-1") == "b"
    assert shard_b.learn("org-1", None) == "b"  # deleted
    assert shard_b.known("org-1") is None


def test_only_a_change_of_what_an_instance_declares_changes_its_fingerprint() -> None:
    body: dict[str, Any] = {
        "metadata": {"labels": {"x": "1"}, "annotations": {"humanwork.io/rotate-token": "t"}},
        "spec": {"replicas": 1},
        "status": {"phase": "Ready"},
    }
    base = fingerprint(body, "kopf.humanwork.io")
    body["status"] = {"phase": "Pending"}
    body["metadata"]["resourceVersion"] = "99"
    body["metadata"]["annotations"]["kopf.humanwork.io/last-handled-configuration"] = "{}"
    body["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"] = "{}"
    assert fingerprint(body, "kopf.humanwork.io") == base
    for change in (
        lambda b: b["spec"].update(replicas=2),
        lambda b: b["metadata"]["labels"].update(x="2"),
        lambda b: b["metadata"]["annotations"].update({"humanwork.io/revoke-token": "now"}),
    ):
        changed: dict[str, Any] = {
            "metadata": {
                "labels": dict(body["metadata"]["labels"]),
                "annotations": dict(body["metadata"]["annotations"]),
            },
            "spec": dict(body["spec"]),
        }
        change(changed)
        assert fingerprint(changed, "kopf.humanwork.io") != base


def test_the_trigger_names_the_first_sight_of_an_instance_apart_from_its_changes() -> None:
    assert trigger_for("ADDED", known=False) == "create"
    assert trigger_for(None, known=False) == "resume"
    assert trigger_for("MODIFIED", known=False) == "resume"
    assert trigger_for("MODIFIED", known=True) == "update"
