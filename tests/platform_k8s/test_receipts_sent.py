"""Receipts to the end, on real PostgreSQL and the real apiserver: every call the upstream
answered yields one signed receipt, its error answers (4xx, 5xx) included, with the
answer's status and digest; a call refused before it reached the upstream yields none;
and the webhook's `step_executed` event carries the step's receipt, which verifies with
the published key while a changed byte does not."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from humanwork_core import receipts
from humanwork_dev.fakes.shopify import FakeShopify
from platform_api.settings import Settings
from tests.agents import agent_credentials, provision_agent
from tests.browser.support import record_execution
from tests.conftest import Cluster
from tests.notify_support import Receiver
from tests.platform.conftest import make_settings
from tests.platform_k8s.conftest import RECEIPT_KEY, Orgs, TaskApi, receipt_settings, until
from tests.platform_k8s.test_tool_ledger import FIX, approved_write, verify_offline
from tests.platform_k8s.test_tool_proxy import call, enable, store_credentials, write_plan

ADJUST = "inventory_levels/adjust.json"


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path, tmp_path: Path) -> Settings:
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_timeout_seconds=1.0,
        upstream_allowed_endpoints=["127.0.0.1/32"],  # the fakes and the receiver
        webhook_backoff_seconds=0.3,
        notify_interval_seconds=0.3,
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


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(fail_first=0).start()
    yield found
    found.stop()


async def listed(client: httpx.AsyncClient, orgs: Orgs, name: str) -> list[dict[str, Any]]:
    path = f"/agentic/tasks/{orgs.ns_a}/{name}/receipts"
    found = await client.get(path, headers=orgs.expert.headers)
    assert found.status_code == 200, found.text
    items: list[dict[str, Any]] = found.json()["items"]
    return items


async def audited(client: httpx.AsyncClient, orgs: Orgs) -> list[dict[str, Any]]:
    """The `tool.called` entries of org A's audit log, each entry's details."""
    found = await client.get(
        "/audit", params={"action": "tool.called"}, headers=orgs.admin_a.headers
    )
    assert found.status_code == 200, found.text
    return [entry["details"] for entry in found.json()["items"]]


async def keyset(client: httpx.AsyncClient) -> dict[str, Any]:
    found: dict[str, Any] = (await client.get("/v1/receipt-keys")).json()
    return found


@pytest.mark.parametrize(("status", "code"), [(422, "upstream_error"), (503, None)])
async def test_an_upstreams_error_answer_yields_a_receipt_of_its_status(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
    tmp_path: Path,
    status: int,
    code: str | None,
) -> None:
    """A refused write (4xx, stored and replayed) and a write answered 503 (outcome
    unknown): each reached the upstream once and has exactly one receipt, which states
    the upstream's status and the digest of the answer the platform made of it."""
    _, name = await approved_write(tasks, orgs)
    if status == 503:
        shop.misbehave_after_write("503")
    else:
        shop.fail_next(status, body={"errors": {"available": ["no"]}}, path_contains=ADJUST)
    first = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert first.status_code in (409, 502), first.text
    shop.behave()
    again = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert again.status_code == first.status_code, again.text
    assert len(shop.requests_to(ADJUST)) == 1

    items = await listed(client, orgs, name)
    assert len(items) == 1, items
    receipt = items[0]
    assert receipt["answerStatus"] == status
    assert receipt["step"] == "fix" and receipt["kid"] == RECEIPT_KEY.kid
    assert receipt["callDigest"] == receipts.call_digest("shopify", "adjustInventoryLevel", FIX)
    if code is not None:  # the refusal the agent holds is what the receipt's digest covers
        assert first.json()["code"] == code
        assert receipt["answerDigest"] == receipts.digest(first.json())
    kept = [d["receipt"] for d in await audited(client, orgs) if d.get("receipt")]
    assert kept == [receipt]
    assert verify_offline(tmp_path, receipt, await keyset(client)) == (0, "")


async def test_a_call_refused_before_the_upstream_yields_no_receipt(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    """An unapproved write and a write whose connection is refused reach nothing and get
    no receipt; the positive control: the retry that reaches the upstream gets one."""
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    pending = task["id"].split("/")[1]
    unapproved = await call(
        client, agent, "adjustInventoryLevel", FIX, key="k", task=pending, step="fix"
    )
    assert unapproved.status_code == 403, unapproved.text
    assert unapproved.json()["code"] == "step_not_approved"

    _, name = await approved_write(tasks, orgs)
    shop.refuse_connections()
    try:
        refused = await call(
            client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix"
        )
    finally:
        shop.serve_again()
    assert refused.json()["details"]["outcome"] == "not_sent", refused.text
    assert await listed(client, orgs, pending) == []
    assert await listed(client, orgs, name) == []
    assert [d for d in await audited(client, orgs) if d.get("receipt")] == []

    retried = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert retried.status_code == 200, retried.text
    receipt = retried.json()["receipt"]
    assert receipt["answerStatus"] == 200
    assert await listed(client, orgs, name) == [receipt]
    assert len(shop.side_effects) == 1


async def test_the_webhook_tells_the_executed_step_with_its_receipt(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    cluster: Cluster,
    receiver: Receiver,
    tmp_path: Path,
) -> None:
    hook = await client.put(
        f"/orgs/{orgs.org_a}/webhooks",
        json={"url": receiver.url, "events": ["step_executed", "completed"]},
        headers=orgs.admin_a.headers,
    )
    assert hook.status_code == 200, hook.text
    task_id, name = await approved_write(tasks, orgs)
    ran = await call(client, agent, "adjustInventoryLevel", FIX, key="k", task=name, step="fix")
    assert ran.status_code == 200, ran.text
    receipt = ran.json()["receipt"]
    record_execution(cluster, task_id, "fix", ran.json()["result"], "Succeeded")

    def executed() -> list[dict[str, Any]]:
        return [e for e in receiver.accepted() if e["event"] == "step_executed"]

    async def seen() -> list[dict[str, Any]]:
        return executed()

    await until(seen, bool, within=30)
    [event] = executed()
    assert event["data"]["task_id"] == task_id and event["data"]["step_id"] == "fix"
    sent = event["data"]["receipt"]
    assert sent == receipt
    published = await keyset(client)
    assert verify_offline(tmp_path, sent, published) == (0, "")
    text = receipts.canonical_json(sent).decode()
    at = text.index(receipt["callDigest"]) + len("sha256:")
    changed_text = text[:at] + ("0" if text[at] != "0" else "1") + text[at + 1 :]
    changed = receipts.parse(changed_text.encode())
    code, err = verify_offline(tmp_path, changed, published)
    assert code == 7 and "receipt_signature_mismatch" in err
