"""Cancel stops everything at once: once a cancel of a task was requested, the tool proxy
refuses the agent's call for its approved step, whether or not the operator has moved the
task to Cancelled yet. The operator is paused here, so that the task is exactly in that
window; the upstream is a real local fake Shopify that counts every side effect.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from humanwork_dev.fakes.shopify import FakeShopify
from humanwork_dev.processes import OperatorProcess
from tests.platform_k8s.conftest import Orgs, TaskApi
from tests.platform_k8s.test_tool_proxy import FIX, agent, call, shop, write_plan

__all__ = ["agent", "shop"]  # fixtures


@pytest.fixture
def operator_paused() -> Iterator[None]:
    """Stop the session's operators for the test, and start them again afterwards."""
    paused = OperatorProcess.running()
    for process in paused:
        process.stop()
    yield
    for process in paused:
        process.start()


async def approved(tasks: TaskApi, orgs: Orgs) -> str:
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    decided = await tasks.decide(orgs.expert, task["id"], "fix")
    assert decided.status_code == 200, decided.text
    await tasks.until(orgs.expert, task["id"], lambda t: t["status"].get("phase") == "InProgress")
    return str(task["id"])


async def test_a_task_with_a_cancel_requested_gets_no_further_tool_call(
    client: httpx.AsyncClient,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
    request: pytest.FixtureRequest,
) -> None:
    cancelled, control = await approved(tasks, orgs), await approved(tasks, orgs)
    request.getfixturevalue("operator_paused")  # nobody moves the task to Cancelled now

    r = await client.post(f"/agentic/tasks/{cancelled}/cancel", headers=orgs.requester.headers)
    assert r.status_code == 202, r.text
    task = (await tasks.get(orgs.expert, cancelled)).json()
    assert task["status"].get("phase") == "InProgress"  # the operator has not acted

    name = cancelled.split("/")[1]
    refused = await call(
        client, agent, "adjustInventoryLevel", FIX, key="c1", task=name, step="fix"
    )
    assert refused.status_code == 409, refused.text
    assert refused.json()["code"] == "task_cancel_requested"
    again = await call(client, agent, "adjustInventoryLevel", FIX, key="c2", task=name, step="fix")
    assert again.status_code == 409 and again.json()["code"] == "task_cancel_requested"
    assert shop.side_effects == []
    audit = await client.get(
        "/audit", params={"action": "tool.called", "limit": 50}, headers=orgs.admin_a.headers
    )
    rows = [i for i in audit.json()["items"] if i["details"].get("task") == name]
    assert len(rows) == 2
    assert all(i["outcome"] == "failure" for i in rows)
    assert {i["details"]["error"] for i in rows} == {"task_cancel_requested"}

    # the positive control: the same call for an approved task nobody cancelled goes through
    other = control.split("/")[1]
    done = await call(client, agent, "adjustInventoryLevel", FIX, key="c3", task=other, step="fix")
    assert done.status_code == 200, done.text
    assert len(shop.side_effects) == 1
