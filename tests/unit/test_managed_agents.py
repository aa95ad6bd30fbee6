"""The pure parts of the managed agents (issue 15, items 1 and 2): the AgentInstance body
the platform sends (the CRD's model, the org's id), the merge of a change, the audited
difference and an agent's health."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from platform_api.agents.status import (
    changed_fields,
    health,
    instance_body,
    merge_patch,
    open_tasks,
    owned_by,
)
from platform_api.errors import AgentSpecInvalid

ORG = uuid.UUID("6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90")
SPEC: dict[str, Any] = {
    "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders."},
    "model": "openai/gpt-4o",
    "llm": {"baseURL": "https://llm.example/v1", "apiKeySecretRef": {"name": "llm", "key": "k"}},
}


def test_the_body_is_the_crds_model_with_the_orgs_id_whatever_the_caller_says() -> None:
    body = instance_body(ORG, "org-acme", "shop", {**SPEC, "orgId": str(uuid.uuid4())})
    assert body["spec"]["orgId"] == str(ORG)
    assert body["spec"]["replicas"] == 1 and body["spec"]["token"]["ttlSeconds"] == 86400
    assert body["metadata"] == {
        "name": "shop",
        "namespace": "org-acme",
        "labels": {"app.kubernetes.io/managed-by": "humanwork-platform-api"},
    }
    assert body["kind"] == "AgentInstance" and owned_by(body, ORG)


@pytest.mark.parametrize(
    ("change", "where"),
    [
        ({"temperature": 3}, ["spec", "temperature"]),
        ({"enabledTools": ["Bad Tool"]}, ["spec", "enabledTools", 0]),
        ({"token": {"ttlSeconds": 600, "rotateBeforeSeconds": 600}}, ["spec", "token"]),
        ({"surprise": True}, ["spec", "surprise"]),
    ],
)
def test_a_bad_spec_is_refused_with_where_and_without_the_input(
    change: dict[str, Any], where: list[Any]
) -> None:
    with pytest.raises(AgentSpecInvalid) as caught:
        instance_body(ORG, "org-acme", "shop", {**SPEC, **change})
    body = caught.value.body()
    assert body["code"] == "agent_spec_invalid"
    assert [e["loc"] for e in body["details"]["errors"]] == [where]
    assert all("input" not in e for e in body["details"]["errors"])


def test_a_change_merges_like_rfc_7386_and_the_audit_sees_only_what_changed() -> None:
    before = {**SPEC, "replicas": 1, "image": "agent:1"}
    after = merge_patch(before, {"replicas": 2, "image": None, "specialist": {"name": "Ann"}})
    assert after["replicas"] == 2 and "image" not in after
    assert after["specialist"] == {"name": "Ann", "systemPrompt": "You reconcile orders."}
    assert before["replicas"] == 1 and before["image"] == "agent:1"  # untouched
    assert changed_fields(before, after) == {
        "before": {"image": "agent:1", "replicas": 1, "specialist": SPEC["specialist"]},
        "after": {"image": None, "replicas": 2, "specialist": after["specialist"]},
    }


def test_open_tasks_count_every_phase_but_the_terminal_ones() -> None:
    tasks = [
        {"spec": {"agentRef": {"name": "shop"}}, "status": {"phase": phase}}
        for phase in ("PendingApproval", "InProgress", "Completed", "Cancelled", "Expired")
    ] + [{"spec": {"agentRef": {"name": "shop"}}}, {"spec": {"agentRef": {"name": "other"}}}]
    assert open_tasks(tasks) == {"shop": 3, "other": 1}


def test_health_compares_the_rolled_out_configuration_with_the_reported_one() -> None:
    beat = datetime(2026, 12, 1, tzinfo=UTC)
    instance = {
        "metadata": {"annotations": {"humanwork.io/config-applied": "a" * 64}},
        "spec": {"replicas": 2},
        "status": {
            "phase": "Ready",
            "readyReplicas": 2,
            "replicas": 2,
            "configHash": "a" * 64,
            "token": {"expiresAt": "2026-12-02T00:00:00Z"},
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    seen = health(instance, beat, 4)
    assert seen.config.inSync and seen.openTasks == 4 and seen.lastHeartbeat == beat
    assert seen.tokenExpiresAt == datetime(2026, 12, 2, tzinfo=UTC)
    stale = health({**instance, "metadata": {}}, None, 0)
    assert not stale.config.inSync and stale.config.applied is None
    assert health({"spec": {}}, None, 0).phase is None
