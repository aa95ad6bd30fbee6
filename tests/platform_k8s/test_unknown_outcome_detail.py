"""The review queue's detail of a step whose outcome is unknown, on real PostgreSQL and the
real apiserver: what is known (request sent at, the upstream, the key, the attempt, the
proxy's claim, what the read-back found) and the two choices with what each does; and
what another org, or nobody at all, gets to see of it.

The step is brought to that state the way it happens: a fake Shopify applies the approved
write and answers 503 (or the read-back finds another value), the proxy keeps its claim,
and the agent (here: the test, as the execution's writer) records `OutcomeUnknown`.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from kubernetes import client as kclient

from humanwork_dev.fakes.shopify import FakeShopify
from tests.conftest import Cluster
from tests.platform_k8s.conftest import Orgs, TaskApi
from tests.platform_k8s.test_tool_ledger import (  # noqa: F401 (fixtures)
    FIX,
    SET,
    agent,
    approved_write,
    set_plan,
    settings,
    shop,
)
from tests.platform_k8s.test_tool_proxy import call


def record_unknown(cluster: Cluster, namespace: str, name: str, step: str) -> None:
    """Write the step's execution `OutcomeUnknown`, as the agent does on a 409."""
    objects = kclient.CustomObjectsApi(cluster.api)
    raw = objects.get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", namespace, "agentictasks", name
    )
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for entry in raw["status"]["steps"]:
        if entry["id"] == step:
            entry["execution"] = {
                "state": "OutcomeUnknown",
                "attempt": 1,
                "startedAt": now,
                "finishedAt": now,
                "error": "tool_call_outcome_unknown",
            }
    objects.patch_namespaced_custom_object_status(
        "humanwork.io",
        "v1alpha1",
        namespace,
        "agentictasks",
        name,
        {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
            "status": raw["status"],
        },
    )


async def detail(client: httpx.AsyncClient, orgs: Orgs, task_id: str) -> dict[str, Any]:
    r = await client.get(f"/human-tasks/{task_id}/fix", headers=orgs.expert.headers)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    return body


async def test_the_detail_says_what_is_known_and_what_each_choice_does(
    client: httpx.AsyncClient,
    cluster: Cluster,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],  # noqa: F811
    shop: FakeShopify,  # noqa: F811
) -> None:
    task_id, name = await approved_write(tasks, orgs)
    # before anything was sent: no unknown outcome, nothing to show (the positive control
    # of "null otherwise")
    assert (await detail(client, orgs, task_id))["unknown_outcome"] is None
    shop.misbehave_after_write("503")
    sent = datetime.now(UTC)
    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.json()["code"] == "tool_call_outcome_unknown", first.text
    shop.behave()
    record_unknown(cluster, orgs.ns_a, name, "fix")

    body = await detail(client, orgs, task_id)
    assert body["status"] == "outcome_unknown", body
    known = body["unknown_outcome"]
    uid = (await tasks.get(orgs.expert, task_id)).json()["uid"]
    assert known["integration"] == "shopify" and known["operation"] == "adjustInventoryLevel"
    assert known["idempotency_key"] == f"step:{uid}/fix"
    assert known["attempt"] == 1 and known["ledger"] == "unknown"
    at = datetime.fromisoformat(known["request_sent_at"])
    assert sent - timedelta(seconds=5) <= at <= datetime.now(UTC), known
    assert known["upstream_error"], known  # the 503's code, from the audit log
    # an adjustment by a delta cannot be read back: the expert must check
    assert known["read_back"] == "not_available", known
    assert [c["outcome"] for c in known["choices"]] == ["applied", "not_applied"]
    assert [c["label"] for c in known["choices"]] == [
        "Mark as executed",
        "Mark as not executed and retry",
    ]
    assert "happens twice" in known["choices"][1]["effect"]

    # the first choice, as the page sends it: the step completes, nothing is left to show
    resolved = await client.post(
        f"/human-tasks/{task_id}/fix/resolve",
        json={"outcome": known["choices"][0]["outcome"], "note": "the admin shows -3"},
        headers=orgs.expert.headers,
    )
    assert resolved.status_code == 200, resolved.text
    after = await detail(client, orgs, task_id)
    assert after["status"] != "outcome_unknown" and after["unknown_outcome"] is None
    assert len(shop.side_effects) == 1


async def test_a_set_the_read_back_does_not_confirm_shows_as_inconclusive(
    client: httpx.AsyncClient,
    cluster: Cluster,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],  # noqa: F811
    shop: FakeShopify,  # noqa: F811
) -> None:
    task = await tasks.create(orgs.requester, orgs.org_a, **set_plan())
    assert (await tasks.decide(orgs.expert, task["id"], "fix")).status_code == 200
    name = task["id"].split("/")[1]
    shop.fail_next(503, path_contains="inventory_levels/set.json")
    first = await call(client, agent, "setInventoryLevel", SET, key="k", task=name, step="fix")
    assert first.json()["code"] == "tool_call_outcome_unknown", first.text
    record_unknown(cluster, orgs.ns_a, name, "fix")
    known = (await detail(client, orgs, task["id"]))["unknown_outcome"]
    assert known["operation"] == "setInventoryLevel"
    assert known["read_back"] == "inconclusive", known
    assert "does not show the approved value" in known["read_back_detail"]


async def test_another_org_learns_nothing_of_the_unknown_outcome(
    client: httpx.AsyncClient,
    cluster: Cluster,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],  # noqa: F811
    shop: FakeShopify,  # noqa: F811
) -> None:
    """Org B's expert, and a caller without a token, get no detail (404 / 401) where org
    A's expert (the positive control) gets it; and neither can resolve it."""
    task_id, name = await approved_write(tasks, orgs)
    shop.misbehave_after_write("503")
    await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    shop.behave()
    record_unknown(cluster, orgs.ns_a, name, "fix")
    assert (await detail(client, orgs, task_id))["unknown_outcome"]["ledger"] == "unknown"

    theirs = await client.get(f"/human-tasks/{task_id}/fix", headers=orgs.expert_b.headers)
    assert theirs.status_code == 404 and theirs.json()["code"] == "not_found", theirs.text
    assert "idempotency_key" not in theirs.text and "shopify" not in theirs.text
    anonymous = await client.get(f"/human-tasks/{task_id}/fix")
    assert anonymous.status_code == 401, anonymous.text
    refused = await client.post(
        f"/human-tasks/{task_id}/fix/resolve",
        json={"outcome": "not_applied"},
        headers=orgs.expert_b.headers,
    )
    assert refused.status_code == 404, refused.text
    # nothing changed: the claim is still open, the step still unknown
    still = await detail(client, orgs, task_id)
    assert still["status"] == "outcome_unknown" and still["unknown_outcome"]["ledger"] == "unknown"
