"""The tool proxy and the client's confirmation, from the attacker's side: an agent holding
a valid token cannot run an approved high-stakes step of a client's task until that client
confirmed it, even where the task's status records no confirmation at all (the proxy
recomputes from trusted data which steps need one); once the client confirmed, the same
call goes through and the upstream (a real local fake Shopify) sees exactly one write."""

from __future__ import annotations

import uuid

import httpx
from fastapi import FastAPI

from humanwork_core import taskflow
from humanwork_core.requester import REQUESTER_ANNOTATION
from humanwork_core.resources import AgenticTask
from humanwork_dev.fakes.shopify import FakeShopify
from platform_api.state import KUBE
from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs, TaskApi
from tests.platform_k8s.test_tool_proxy import FIX, MUG, agent, call, shop, write_plan

__all__ = ["agent", "shop"]  # fixtures


async def test_the_proxy_refuses_an_unconfirmed_step_then_writes_once(
    app: FastAPI,
    client: httpx.AsyncClient,
    api: Api,
    tasks: TaskApi,
    orgs: Orgs,
    agent: dict[str, str],
    shop: FakeShopify,
) -> None:
    kube = KUBE.of(app.state)
    assert kube is not None
    mine = await api.user(
        await api.admin(), f"client-{uuid.uuid4().hex[:6]}", "client", [orgs.org_a]
    )
    before = shop.inventory(MUG)
    task = await tasks.create(orgs.requester, orgs.org_a, **write_plan(FIX))
    namespace, name = task["id"].split("/")
    # bound to the client by the platform, but no confirmation recorded in the status
    await kube.annotate_task(namespace, name, {REQUESTER_ANNOTATION: mine.username})
    decided = await tasks.decide(orgs.expert, task["id"], "fix")
    assert decided.status_code == 200, decided.text

    refused = await call(
        client, agent, "adjustInventoryLevel", FIX, key="k1", task=name, step="fix"
    )
    assert refused.status_code == 403, refused.text
    assert refused.json()["code"] == "step_not_approved"
    assert refused.json()["details"]["reason"] == "not_confirmed"
    assert shop.side_effects == [] and shop.inventory(MUG) == before

    current = AgenticTask.from_wire(await kube.get_task(namespace, name))
    step = current.step("fix")
    assert step is not None
    digest = taskflow.confirmation_hash(step, current.current_status().step("fix"))
    confirmed = await client.post(
        f"/orgs/{orgs.org_a}/tasks/{name}/steps/fix/confirm",
        json={"step_hash": digest},
        headers=mine.headers,
    )
    assert confirmed.status_code == 200, confirmed.text

    done = await call(client, agent, "adjustInventoryLevel", FIX, key="k2", task=name, step="fix")
    assert done.status_code == 200, done.text
    assert len(shop.side_effects) == 1
    assert before is not None and shop.inventory(MUG) == before - 3
