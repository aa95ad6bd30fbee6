"""The client's side end to end, as a client and an expert do it: the operator, the platform
API, the org's agent as a process and fake Shopify/Amazon servers, the client in headless
Chromium on the portal.

A client signs in to the portal and writes the seed's request. With nobody else acting
the platform dispatches the message, the agent files its plan and the plan appears in
the expert's queue. The expert approves the reads, then approves the write with the
concrete correction; the write still waits for the client, who confirms it in the portal;
the fake Shopify sees exactly one write, and the conversation shows the result.

Needs the dispatch of client messages, the conversation endpoints and the client's
confirmation (the `dispatch`, `clients` and `confirm` parts of the client's side).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from playwright.async_api import Browser, Page, async_playwright, expect

from humanwork_dev.fakes import catalog
from tests.browser.conftest import chromium_executable
from tests.e2e.conftest import SEED_REQUEST, World, execution_state, step_of

FIX = {
    "action": "adjustInventoryLevel",
    "params": {
        "location_id": catalog.WAREHOUSE_LOCATION_ID,
        "inventory_item_id": catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id,
        "available_adjustment": -catalog.DISCREPANCY,
    },
}
UI_MS = 60_000
"""A loaded two-core machine: the agent plans, executes and reports within this."""


@pytest.fixture
async def chromium() -> AsyncIterator[Browser]:
    executable = chromium_executable()
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, headless=True)
        yield launched
        await launched.close()


async def add_client(world: World) -> tuple[str, str]:
    """A user with the role `client` in the world's org; (username, password)."""
    username, password, _ = await world.add_user("client", "client")
    return username, password


async def sign_in(page: Page, base: str, username: str, password: str) -> None:
    await page.goto(f"{base}/portal/conversations")
    await expect(page).to_have_url(re.compile(r"/portal/login\?next="))
    await page.get_by_label("Username").fill(username)
    await page.get_by_label("Password").fill(password)
    await page.get_by_role("button", name="Sign in").click()
    await expect(page.locator("#user-name")).to_have_text(username)


async def queued_task(world: World, cid: str, within: float = 120) -> str:
    """The name of the task filed for conversation `cid`, once the expert's queue shows it."""
    deadline = time.monotonic() + within
    while True:
        r = await world.http.get(f"{world.platform.url}/human-tasks", headers=world.expert)
        assert r.status_code == 200, r.text
        for item in r.json()["items"]:
            namespace, _, name = str(item.get("task_id") or "").partition("/")
            if namespace != world.namespace or not name:
                continue  # a draft reply, or another org's
            task = await world.task(name)
            if task["spec"].get("conversationId") == cid:
                return name
        if time.monotonic() > deadline:
            raise AssertionError(
                f"no plan for conversation {cid} in the queue within {within}s: {r.text[:2000]}"
                f"\nagent log:\n{world.agent.tail(40)}"
            )
        await asyncio.sleep(0.5)


def phase(task: dict[str, Any]) -> Any:
    return (task.get("status") or {}).get("phase")


async def test_a_client_starts_the_seed_flow_and_confirms_the_write_in_the_portal(
    world: World, chromium: Browser
) -> None:
    base = world.platform.url
    username, password = await add_client(world)
    context = await chromium.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    page.set_default_timeout(UI_MS)
    problems: list[str] = []
    page.on("pageerror", lambda exc: problems.append(str(exc)))

    # the client signs in and writes the seed's request
    await sign_in(page, base, username, password)
    await page.get_by_label("Subject").fill("October reconciliation")
    await page.get_by_label("Your message").fill(SEED_REQUEST)
    await page.get_by_role("button", name="Start the conversation").click()
    await expect(page).to_have_url(re.compile(r"/conversations/[0-9a-f-]{36}$"))
    cid = page.url.rsplit("/", 1)[1]
    await expect(page.locator("#messages li").first).to_contain_text(SEED_REQUEST)

    # with nobody else acting, the plan reaches the expert's queue and the client's card
    name = await queued_task(world, cid)
    task = await world.task(name)
    read, write = task["spec"]["steps"][0]["id"], task["spec"]["steps"][-1]["id"]
    card = page.locator(f'#plans [data-task="{name}"]')
    await expect(card).to_be_visible()
    assert world.shop.side_effects == [] and world.amazon.side_effects == []

    # the expert approves the reads; they run
    r = await world.decide(name, read)
    assert r.status_code == 200, r.text
    await world.until(name, lambda t: execution_state(t, read) == "Succeeded", within=120)
    # the expert approves the write with the concrete correction: it waits for the client
    r = await world.resume(name, write, action="edit", parameters=FIX)
    assert r.status_code == 200, r.text
    confirm = card.locator(f'li[data-step="{write}"] button.confirm')
    await expect(confirm).to_be_visible()
    # the client sees the values the expert set before it confirms (a confirmation of the
    # plan as first shown would be refused as stale: the expert's edit voided it)
    edited = f"available_adjustment: {-catalog.DISCREPANCY}"
    await expect(card.locator(f'li[data-step="{write}"]')).to_contain_text(edited)
    task = await world.task(name)
    assert execution_state(task, write) is None
    assert world.shop.side_effects == []  # nothing written before the client confirms

    # the client confirms in the portal: exactly one write reaches Shopify
    await confirm.click()
    task = await world.until(name, lambda t: phase(t) == "Completed", within=120)
    assert execution_state(task, write) == "Succeeded", step_of(task, write)
    assert len(world.shop.side_effects) == 1
    assert world.shop.levels() == catalog.expected_inventory_after_reconcile()

    # the conversation shows the result, live: the step done, the request's ending message
    await expect(card.locator(f'li[data-step="{write}"]')).to_have_attribute("data-state", "done")
    ended = page.locator('#messages li[data-author-kind="system"]', has_text="is complete")
    await expect(ended).to_have_count(1)
    async with httpx.AsyncClient(timeout=30) as http:
        token = await http.post(
            f"{base}/auth/token", json={"username": username, "password": password}
        )
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        r = await http.get(f"{base}/orgs/{world.org_id}/conversations/{cid}", headers=headers)
    assert r.status_code == 200, r.text
    told = [m["meta"] for m in r.json()["messages"] if m["author_kind"] == "system" and m["meta"]]
    assert {"event": "request_ended", "task": name, "ending": "completed"} in [
        {k: e.get(k) for k in ("event", "task", "ending")} for e in told
    ], told
    assert len(world.shop.side_effects) == 1  # still one
    await context.close()
    assert not problems, problems
