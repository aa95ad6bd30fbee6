"""The tool proxy's ledger against a flaky upstream and a second agent (issue 12, items 4
and 5), on real PostgreSQL and the real apiserver.

A fake Shopify that APPLIES a write and then answers late (after the proxy's timeout),
answers 503, or cuts the connection: however often the agent calls again (fresh keys
included), the upstream sees exactly one side effect and every call answers 409
`tool_call_outcome_unknown`. A definite refusal (4xx) is stored and replayed. A connection
refused before anything was sent releases the claim: the retry succeeds, once. And one
agent's keys (tool calls, events) neither block nor replay another agent's in the same org.
"""

from __future__ import annotations

import io
import json
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as kclient

from humanwork_core import receipts, signing
from humanwork_core.signing import SIGNATURE_HEADER
from humanwork_dev.fakes import catalog
from humanwork_dev.fakes.shopify import FakeShopify
from kubectl_humanwork import main as plugin
from platform_api.settings import Settings
from tests.agents import (
    agent_credentials,
    create_instance,
    provision_agent,
    secret_value,
    wait_phase,
)
from tests.conftest import Cluster
from tests.platform.conftest import make_settings
from tests.platform_k8s.conftest import (
    RECEIPT_KEY,
    RETIRED_RECEIPT_KEY,
    Orgs,
    TaskApi,
    receipt_settings,
    until,
)
from tests.platform_k8s.test_tool_proxy import call, enable, store_credentials, write_plan

MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
FIX = {"location_id": WAREHOUSE, "inventory_item_id": MUG, "available_adjustment": -3}
PROXY_TIMEOUT = 1.0


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, tmp_path: Path) -> Settings:
    """The platform with a short upstream timeout, so that `late` answers come after it."""
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_timeout_seconds=PROXY_TIMEOUT,
        upstream_allowed_endpoints=["127.0.0.1/32"],  # the fakes listen on loopback
        **receipt_settings(tmp_path),
    )


@pytest.fixture
def shop() -> Iterator[FakeShopify]:
    with FakeShopify() as fake:
        yield fake


@pytest.fixture
async def agent(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, shop: FakeShopify
) -> dict[str, str]:
    """Org A's agent `agent` (its token header), Shopify enabled and pointed at the fake."""
    provision_agent(cluster, orgs.ns_a, orgs.org_a)
    await enable(client, orgs.admin_a, orgs.org_a, "shopify")
    await store_credentials(client, orgs.admin_a, orgs.org_a, "shopify", shop.credentials())
    token, _ = agent_credentials(cluster, orgs.ns_a)
    return {"Authorization": f"Bearer {token}"}


async def approved_write(tasks: TaskApi, orgs: Orgs) -> tuple[str, str]:
    """A task of `agent` with one approved write step `fix`; (task id, task name)."""
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    decided = await tasks.decide(orgs.expert, task["id"], "fix")
    assert decided.status_code == 200, decided.text
    return task["id"], task["id"].split("/")[1]


@pytest.mark.parametrize("mode", ["late", "503", "cut"])
async def test_a_write_whose_answer_is_lost_reaches_the_upstream_once(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
    mode: str,
) -> None:
    before = shop.inventory(MUG)
    assert before is not None
    task_id, name = await approved_write(tasks, orgs)
    shop.misbehave_after_write(mode, seconds=PROXY_TIMEOUT + 1.5)

    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.status_code == 409, first.text
    assert first.json()["code"] == "tool_call_outcome_unknown", first.text
    # the executor's retries, and a compromised agent's fresh keys, over a window in which
    # today's proxy let 8 writes through: none reaches the upstream again, even once it
    # behaves
    shop.behave()
    later = [
        await call(client, agent, "adjustInventoryLevel", FIX, key=k, task=name, step="fix")
        for k in ("k", "k", "fresh-1", "fresh-2", "k", "fresh-3", "k", "k")
    ]
    assert [r.json()["code"] for r in later] == ["tool_call_outcome_unknown"] * 8

    # the fake logs the late write once it answered it: wait for that, then nothing else came
    async def late_write_logged() -> list[Any]:
        return shop.requests_to("inventory_levels/adjust.json")

    await until(late_write_logged, bool, within=PROXY_TIMEOUT + 60)
    assert len(shop.side_effects) == 1, shop.side_effects
    assert shop.inventory(MUG) == before - 3
    assert len(shop.requests_to("inventory_levels/adjust.json")) == 1
    # the write carried a key derived from the approved step
    uid = (await tasks.get(orgs.expert, task_id)).json()["uid"]
    assert shop.side_effects[0].idempotency_key == f"step:{uid}/fix"


async def test_a_definite_refusal_is_stored_and_replayed(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    _, name = await approved_write(tasks, orgs)
    shop.fail_next(
        422, body={"errors": {"available": ["must be stocked"]}}, path_contains="adjust.json"
    )
    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.status_code == 502 and first.json()["code"] == "upstream_error", first.text
    again = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert again.json()["code"] == "upstream_error", again.text
    assert again.json()["details"]["replayed"] == "true", again.text
    assert len(shop.requests_to("inventory_levels/adjust.json")) == 1
    assert shop.side_effects == []


async def test_a_refused_connection_releases_the_claim_and_the_retry_succeeds_once(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    """The positive control: nothing was sent, so a retry may (and does) call again."""
    before = shop.inventory(MUG)
    assert before is not None
    _, name = await approved_write(tasks, orgs)
    shop.refuse_connections()
    try:
        refused = await call(
            client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix"
        )
    finally:
        shop.serve_again()
    assert refused.status_code == 502, refused.text
    assert refused.json()["details"]["outcome"] == "not_sent", refused.text
    retried = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert retried.status_code == 200, retried.text
    assert retried.json()["replayed"] is False
    replay = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert replay.status_code == 200 and replay.json()["replayed"] is True
    assert len(shop.side_effects) == 1
    assert shop.inventory(MUG) == before - 3


def verify_offline(directory: Path, document: Any, keyset: Any) -> tuple[int, str]:
    """`kubectl humanwork receipt verify FILE --keys KEYSET`: its exit code and stderr."""
    receipt_file, keys_file = directory / "receipts.json", directory / "keys.json"
    receipt_file.write_text(json.dumps(document))
    keys_file.write_text(json.dumps(keyset))
    out, err = io.StringIO(), io.StringIO()
    argv = ["receipt", "verify", str(receipt_file), "--keys", str(keys_file)]
    return plugin.main(argv, env={}, stdout=out, stderr=err), err.getvalue()


async def test_a_call_that_reached_the_upstream_yields_one_signed_receipt(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
    tmp_path: Path,
) -> None:
    task_id, name = await approved_write(tasks, orgs)
    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.status_code == 200, first.text
    receipt = first.json()["receipt"]
    uid = (await tasks.get(orgs.expert, task_id)).json()["uid"]
    assert receipt["task"] == {"namespace": orgs.ns_a, "name": name, "uid": uid}
    assert receipt["step"] == "fix" and receipt["agent"] == f"{orgs.ns_a}/agent"
    assert receipt["callDigest"] == receipts.call_digest("shopify", "adjustInventoryLevel", FIX)
    assert receipt["answerDigest"] == receipts.digest(first.json()["result"])
    assert [a["verdict"] for a in receipt["approvals"]] == ["approve"]
    assert receipt["kid"] == RECEIPT_KEY.kid
    # replays (the agent's key, a fresh one): the very same receipt, never a second
    for key in ("k", "fresh"):
        again = await call(
            client, agent, "adjustInventoryLevel", FIX, key=key, task=name, step="fix"
        )
        assert again.json()["replayed"] is True and again.json()["receipt"] == receipt
    assert len(shop.side_effects) == 1

    # kept with the task, for its org's experts only; and in the audit log
    path = f"/agentic/tasks/{orgs.ns_a}/{name}/receipts"
    stranger = await client.get(path, headers=orgs.expert_b.headers)
    assert stranger.status_code == 404 and stranger.json()["code"] == "not_found"
    assert receipt["signature"] not in stranger.text
    listed = await client.get(path, headers=orgs.expert.headers)
    assert listed.status_code == 200 and listed.json()["items"] == [receipt], listed.text
    audit = await client.get(
        "/audit", params={"action": "tool.called"}, headers=orgs.admin_a.headers
    )
    kept = [r["details"]["receipt"] for r in audit.json()["items"] if r["details"].get("receipt")]
    assert kept == [receipt]

    # checked offline against the published keys (the retired one included)
    keyset = (await client.get("/v1/receipt-keys")).json()
    assert [k["kid"] for k in keyset["keys"]] == [RECEIPT_KEY.kid, RETIRED_RECEIPT_KEY.kid]
    assert verify_offline(tmp_path, listed.json(), keyset) == (0, "")
    changed = {**receipt, "answerDigest": receipts.digest({"inventory_level": {}})}
    code, err = verify_offline(tmp_path, changed, keyset)
    assert code == 7 and "receipt_signature_mismatch" in err


SET = {"location_id": WAREHOUSE, "inventory_item_id": MUG, "available": 25}


def set_plan() -> dict[str, Any]:
    plan = write_plan(SET)
    plan["steps"][0]["parameters"] = {"action": "setInventoryLevel", "params": SET}
    return plan


async def test_a_set_whose_answer_is_lost_is_settled_by_reading_it_back(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    """Optional read-only check: an absolute set that the upstream now shows is applied."""
    task = await tasks.create(orgs.requester, orgs.org_a, **set_plan())
    assert (await tasks.decide(orgs.expert, task["id"], "fix")).status_code == 200
    name = task["id"].split("/")[1]
    shop.misbehave_after_write("503")
    first = await call(client, agent, "setInventoryLevel", SET, key="k", task=name, step="fix")
    assert first.status_code == 200, first.text
    assert first.json()["result"]["confirmedByReadBack"] is True
    assert first.json()["result"]["inventory_level"]["available"] == 25
    again = await call(client, agent, "setInventoryLevel", SET, key="k", task=name, step="fix")
    assert again.status_code == 200 and again.json()["replayed"] is True
    assert len(shop.side_effects) == 1 and shop.inventory(MUG) == 25


async def test_a_set_the_read_does_not_confirm_stays_unknown(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    task = await tasks.create(orgs.requester, orgs.org_a, **set_plan())
    assert (await tasks.decide(orgs.expert, task["id"], "fix")).status_code == 200
    name = task["id"].split("/")[1]
    shop.fail_next(503, path_contains="inventory_levels/set.json")  # never reached the shop
    first = await call(client, agent, "setInventoryLevel", SET, key="k", task=name, step="fix")
    assert first.status_code == 409, first.text
    assert first.json()["code"] == "tool_call_outcome_unknown"
    again = await call(client, agent, "setInventoryLevel", SET, key="k2", task=name, step="fix")
    assert again.json()["code"] == "tool_call_outcome_unknown"
    assert shop.side_effects == [] and len(shop.requests_to("set.json")) == 1


# --- two agents in one org -------------------------------------------------------------


@pytest.fixture
async def other(cluster: Cluster, orgs: Orgs, agent: dict[str, str]) -> tuple[str, str]:
    """A second AgentInstance `other` in org A: (its token header value, its callback
    secret)."""
    create_instance(cluster, orgs.ns_a, orgs.org_a, name="other", enabledTools=["shopify"])
    wait_phase(cluster, orgs.ns_a, "Ready", name="other")
    return (
        secret_value(cluster, orgs.ns_a, "other-agent-token", "token"),
        secret_value(cluster, orgs.ns_a, "other-agent-callback", "secret"),
    )


async def test_one_agents_tool_keys_neither_block_nor_replay_anothers(
    client: httpx.AsyncClient,
    orgs: Orgs,
    agent: dict[str, str],
    other: tuple[str, str],
    shop: FakeShopify,
) -> None:
    b = {"Authorization": f"Bearer {other[0]}"}
    # A pre-empts B's keys: one with another request, one with the same request
    order = catalog.shopify_orders()[0]["id"]
    squat = await call(client, agent, "getOrder", {"id": order}, key="b-1")
    assert squat.status_code == 200, squat.text
    seen = await call(client, agent, "listProducts", {}, key="b-2")
    assert seen.status_code == 200, seen.text

    blocked = await call(client, b, "listProducts", {}, key="b-1")
    assert blocked.status_code == 200, blocked.text  # not 422 idempotency_conflict
    mine = await call(client, b, "listProducts", {}, key="b-2")
    assert mine.status_code == 200 and mine.json()["replayed"] is False, mine.text
    # A once, then each of B's two calls itself (neither answered from A's record)
    assert len(shop.requests_to("products.json")) == 3


def _event(ns: str, agent: str, org_id: str, key: str) -> bytes:
    return json.dumps(
        {
            "event_type": "task.step_completed",
            "agent_id": f"{ns}/{agent}",
            "org_id": org_id,
            "task_id": "t",
            "step_id": "fix",
            "timestamp": datetime.now(UTC).isoformat(),
            "payload": {"by": agent},
            "idempotency_key": key,
        }
    ).encode()


async def test_one_agents_event_keys_do_not_suppress_anothers(
    client: httpx.AsyncClient,
    cluster: Cluster,
    orgs: Orgs,
    agent: dict[str, str],
    other: tuple[str, str],
) -> None:
    _, secret_a = agent_credentials(cluster, orgs.ns_a)
    key = f"{uuid.uuid4()}/completed"

    async def post(raw: bytes, secret: str) -> httpx.Response:
        headers = {
            "Content-Type": "application/json",
            SIGNATURE_HEADER: signing.sign(secret, raw, datetime.now(UTC)),
        }
        return await client.post("/v1/agent-events", content=raw, headers=headers)

    squat = await post(_event(orgs.ns_a, "agent", orgs.org_a, key), secret_a)
    assert squat.status_code in (200, 202), squat.text
    assert squat.json()["duplicate"] is False
    theirs = await post(_event(orgs.ns_a, "other", orgs.org_a, key), other[1])
    assert theirs.status_code in (200, 202), theirs.text
    assert theirs.json()["duplicate"] is False, theirs.text  # B's event is B's own
    again = await post(_event(orgs.ns_a, "other", orgs.org_a, key), other[1])
    assert again.json()["duplicate"] is True  # B's own replay still deduplicates


async def test_a_forged_unknown_outcome_buys_no_second_write(
    client: httpx.AsyncClient,
    cluster: Cluster,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    """A compromised agent whose write went through records the step's execution as
    `OutcomeUnknown` itself (it is the execution's writer) so that an expert, finding no
    trace, answers `not_applied`: the ledger holds the finished call, so nothing is
    released and the agent's next call replays the first result."""
    task_id, name = await approved_write(tasks, orgs)
    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.status_code == 200, first.text
    ns = orgs.ns_a
    objects = kclient.CustomObjectsApi(cluster.api)
    raw = objects.get_namespaced_custom_object("humanwork.io", "v1alpha1", ns, "agentictasks", name)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    for entry in raw["status"]["steps"]:
        if entry["id"] == "fix":
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
        ns,
        "agentictasks",
        name,
        {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
            "status": raw["status"],
        },
    )
    resolved = await client.post(
        f"/human-tasks/{task_id}/fix/resolve",
        json={"outcome": "not_applied", "note": "no trace in the admin"},
        headers=orgs.expert.headers,
    )
    assert resolved.status_code == 200, resolved.text
    assert resolved.json()["ledger"] == "absent"  # nothing open to release
    again = await call(
        client, agent, "adjustInventoryLevel", FIX, key="fresh", task=name, step="fix"
    )
    assert again.status_code == 200 and again.json()["replayed"] is True, again.text
    assert len(shop.side_effects) == 1
