"""The client portal's plan cards in headless Chromium: each task started from the
conversation with each step's state, updated live when an expert decides; the client's
confirmation of a high-stakes step it started (confirm, or decline with a required
reason); the whole flow by keyboard alone; what changed since the last visit."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from humanwork_dev.fakes.catalog import SEED_REQUEST
from tests.browser.portal_support import (
    DOCS_IMAGES,
    READ,
    WRITE,
    Client,
    add_client,
    client_login,
    client_task,
    conversation_of,
    no_horizontal_overflow,
    phone,
    tab_to,
)
from tests.browser.support import Org, until

LIVE_MS = 15_000
REQUEST = SEED_REQUEST


@pytest.fixture
def client_a(org: Org) -> Client:
    return add_client(org, "client-a")


def client_tasks(org: Org, client: Client, cid: str) -> list[dict[str, Any]]:
    r = org.http.get(f"/orgs/{org.id}/conversations/{cid}/tasks", headers=client.headers)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


def step_of(org: Org, client: Client, cid: str, step_id: str) -> dict[str, Any]:
    [task] = client_tasks(org, client, cid)
    return next(s for s in task["steps"] if s["id"] == step_id)


def approve(org: Org, task_id: str, step_id: str) -> None:
    r = org.http.post(
        f"/agentic/tasks/{task_id}/steps/{step_id}/approve", json={}, headers=org.expert.headers
    )
    assert r.status_code == 200, r.text


def card_step(page: Page, step_id: str) -> Any:
    return page.locator(f'#plans li[data-step="{step_id}"]')


def test_the_plan_card_follows_the_experts_decisions_live(
    page: Page, org: Org, client_a: Client, artifacts: Path
) -> None:
    cid = conversation_of(org, client_a, "October reconciliation", REQUEST)
    task_id = client_task(org, client_a, cid, [READ, WRITE])
    client_login(page, org, client_a, f"/portal/orgs/{org.id}/conversations/{cid}")
    expect(page.locator("body")).to_have_attribute("data-live", "stream")
    expect(page.locator("#plans .plan-card")).to_have_count(1)
    expect(card_step(page, "list-orders")).to_have_attribute("data-state", "waiting for the expert")
    expect(card_step(page, "list-orders")).to_contain_text("low risk")
    expect(card_step(page, "fix-stock")).to_contain_text("high risk")
    page.evaluate("window.__sameDocument = true")

    approve(org, task_id, "list-orders")
    expect(card_step(page, "list-orders")).to_have_attribute(
        "data-state", "approved", timeout=LIVE_MS
    )
    page.screenshot(path=str(DOCS_IMAGES / "portal-plan.png"), full_page=True)
    page.screenshot(path=str(artifacts / "portal-plan.png"), full_page=True)
    phone(page)
    no_horizontal_overflow(page)
    page.screenshot(path=str(DOCS_IMAGES / "portal-plan-phone.png"), full_page=True)
    page.set_viewport_size({"width": 1280, "height": 800})
    assert page.evaluate("window.__sameDocument") is True


def test_the_write_waits_for_the_client_in_plain_language(
    page: Page, org: Org, client_a: Client, artifacts: Path
) -> None:
    cid = conversation_of(org, client_a, "October reconciliation", REQUEST)
    client_task(org, client_a, cid, [READ, WRITE])
    client_login(page, org, client_a, f"/portal/orgs/{org.id}/conversations/{cid}")
    # the write waits for the client (and the expert): the plain-language summary and the two
    # buttons, nothing of its raw parameters but what the summary says
    write = card_step(page, "fix-stock")
    confirm = write.get_by_role("button", name="Confirm: Lower the blue mug's Shopify stock by 3")
    expect(confirm).to_be_visible(timeout=LIVE_MS)
    expect(write.locator("button.decline")).to_be_visible()
    summary = step_of(org, client_a, cid, "fix-stock")["summary"]
    assert summary
    expect(write).to_contain_text(summary)
    page.screenshot(path=str(DOCS_IMAGES / "portal-confirm.png"), full_page=True)
    page.screenshot(path=str(artifacts / "portal-confirm.png"), full_page=True)


def test_decline_needs_a_reason_and_confirm_is_recorded(
    page: Page, org: Org, client_a: Client
) -> None:
    declined_cid = conversation_of(org, client_a, "Decline this", REQUEST)
    client_task(org, client_a, declined_cid, [WRITE])
    confirmed_cid = conversation_of(org, client_a, "Confirm this", REQUEST)
    client_task(org, client_a, confirmed_cid, [WRITE])

    client_login(page, org, client_a, f"/portal/orgs/{org.id}/conversations/{declined_cid}")
    write = card_step(page, "fix-stock")
    write.locator("button.decline").click()
    dialog = page.locator("#decline-dialog")
    expect(dialog).to_be_visible()
    expect(page.locator("#decline-what")).to_contain_text("Lower the blue mug's Shopify stock")
    page.get_by_role("button", name="Decline", exact=True).click()  # no reason
    expect(page.locator("#decline-error")).to_have_text("A reason is required to decline.")
    expect(page.get_by_label("Your reason (required)")).to_be_focused()
    assert step_of(org, client_a, declined_cid, "fix-stock")["confirmation"]["state"] == "waiting"
    page.get_by_label("Your reason (required)").fill("The count is right; do not touch it")
    page.get_by_role("button", name="Decline", exact=True).click()
    expect(dialog).to_be_hidden()
    expect(write).to_have_attribute("data-state", "declined by you", timeout=LIVE_MS)
    expect(write).to_contain_text("The count is right; do not touch it")
    declined = step_of(org, client_a, declined_cid, "fix-stock")["confirmation"]
    assert declined["state"] == "declined" and declined["by"] == client_a.username
    assert declined["reason"] == "The count is right; do not touch it"

    page.goto(f"{org.url}/portal/orgs/{org.id}/conversations/{confirmed_cid}")
    write = card_step(page, "fix-stock")
    write.locator("button.confirm").click()
    expect(write.locator("button.confirm")).to_have_count(0, timeout=LIVE_MS)
    expect(write).to_contain_text("You confirmed this step")
    confirmed = step_of(org, client_a, confirmed_cid, "fix-stock")["confirmation"]
    assert confirmed["state"] == "confirmed" and confirmed["by"] == client_a.username


def test_posting_and_confirming_by_keyboard_alone(page: Page, org: Org, client_a: Client) -> None:
    cid = conversation_of(org, client_a, "By keyboard", REQUEST)
    client_task(org, client_a, cid, [WRITE])
    page.goto(f"{org.url}/portal/orgs/{org.id}/conversations/{cid}")
    expect(page.get_by_label("Username")).to_be_focused()
    page.keyboard.type(client_a.username)
    page.keyboard.press("Tab")
    page.keyboard.type(client_a.password)
    page.keyboard.press("Enter")
    expect(page.locator("#user-name")).to_have_text(client_a.username)
    expect(card_step(page, "fix-stock").locator("button.confirm")).to_be_visible()

    tab_to(page, "#post-text")
    page.keyboard.type("Go ahead with the mugs, by keyboard.")
    tab_to(page, "#post-submit")
    page.keyboard.press("Enter")
    expect(page.locator('#messages li[data-author-kind="client"]').last).to_contain_text(
        "Go ahead with the mugs, by keyboard."
    )

    page.locator("#conversation-title").focus()
    tab_to(page, '#plans button.confirm[data-step="fix-stock"]')
    page.keyboard.press("Enter")
    expect(card_step(page, "fix-stock")).to_contain_text("You confirmed this step", timeout=LIVE_MS)
    assert step_of(org, client_a, cid, "fix-stock")["confirmation"]["state"] == "confirmed"


def test_what_changed_since_the_last_visit(page: Page, org: Org, client_a: Client) -> None:
    cid = conversation_of(org, client_a, "Since last time", REQUEST)
    task_id = client_task(org, client_a, cid, [READ, WRITE])
    path = f"/portal/orgs/{org.id}/conversations/{cid}"
    client_login(page, org, client_a, path)
    expect(page.locator("#plans .plan-card")).to_have_count(1)
    expect(page.locator("#changes")).to_be_hidden()  # a first visit: nothing to compare
    page.goto(f"{org.url}/portal/conversations")  # leave
    expect(page.locator(f'#conversations li[data-id="{cid}"] .pill')).to_have_count(0)

    r = org.http.post(
        f"/conversations/{cid}/messages",
        json={"role": "agent", "author": "shop-agent", "content": "Reads are approved."},
        headers=org.admin.headers,
    )
    assert r.status_code == 201, r.text
    approve(org, task_id, "list-orders")
    until(
        lambda: step_of(org, client_a, cid, "list-orders"),
        lambda s: s["decision"] == "approved",
    )
    page.reload()
    expect(page.locator(f'#conversations li[data-id="{cid}"] .pill')).to_have_text(
        "new since your last visit"
    )
    page.goto(f"{org.url}{path}")
    changes = page.locator("#changes-list li")
    expect(page.locator("#changes")).to_be_visible()
    # the agent's message (and any update the platform wrote about the approval)
    expect(changes.first).to_have_text(re.compile(r"^\d+ new messages?$"))
    expect(page.locator("#changes")).to_contain_text("List October's Amazon orders: approved")
    expect(page.locator("#messages li.fresh", has_text="Reads are approved.")).to_have_count(1)
    expect(page.locator("#messages li:not(.fresh)").first).to_contain_text(REQUEST)
    # seen now: the next visit has nothing new
    page.reload()
    expect(page.locator("#changes-list li")).to_have_text(
        ["Nothing changed since your last visit."]
    )
