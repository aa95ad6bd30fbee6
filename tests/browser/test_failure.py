"""Failure as a first-class path in the workspace, in headless Chromium (issue 15, item 9):
a step whose tool call failed shows the upstream's reason in the detail view; where its
action is safe to retry the expert retries it there (the task reopens), and a step whose
action is not safe to run twice offers no retry."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.support import Org
from tests.browser.test_queue import login

REASON = "upstream_error (upstream answered 503): shopify answered 503 to getOrder"


def failed_task(org: Org, parameters: dict[str, object], risk: str) -> str:
    """A one-step task, approved, whose execution failed, and which the operator failed."""
    step = {
        "id": "work",
        "description": f"Run {parameters['action']}",
        "kind": "action",
        "tool": "shopify",
        "parameters": parameters,
        "risk": risk,
    }
    task_id: str = org.task([step])["id"]
    r = org.http.post(
        f"/agentic/tasks/{task_id}/steps/work/approve", json={}, headers=org.expert2.headers
    )
    assert r.status_code == 200, r.text
    org.record_execution(task_id, "work", None, state="Failed", error=REASON)
    org.wait(task_id, lambda t: t["phase"] == "Failed")
    return task_id


def test_the_expert_sees_why_a_step_failed_and_retries_it(
    page: Page, org: Org, artifacts: Path
) -> None:
    task_id = failed_task(org, {"action": "getOrder", "params": {"id": 1042}}, "low")
    org.wait_queue(
        lambda p: any(i["id"] == f"{task_id}/work" and i["status"] == "failed" for i in p["items"])
    )
    login(page, org, org.expert)
    row = page.locator(f'tr[data-id="{task_id}/work"]')
    expect(row.get_by_role("button", name=re.compile("^(Approve|Reject)"))).to_have_count(0)
    row.get_by_role("link", name=re.compile("^Retry")).click()
    expect(page).to_have_url(f"{org.url}/workspace/tasks/{task_id}/work")
    panel = page.locator("#decide")
    expect(panel).to_contain_text("Step failed")
    expect(page.locator("#failure-reason")).to_have_text(REASON)
    expect(page.locator("#facts .pill").first).to_have_text("failed")
    page.locator("#retry-note").fill("the store is back")
    page.screenshot(path=str(artifacts / "detail-step-failed.png"), full_page=True)
    panel.get_by_role("button", name="Retry step").click()
    expect(page.locator("#notice")).to_contain_text("Retry requested")
    resolution = org.step_entry(task_id, "work")["resolution"]
    assert (resolution["outcome"], resolution["by"], resolution["attempt"]) == (
        "retry",
        org.expert.username,
        1,
    )
    assert resolution["note"] == "the store is back"
    org.wait(task_id, lambda t: t["phase"] == "InProgress")  # reopened for the agent
    org.wait_queue(lambda p: all(i["id"] != f"{task_id}/work" for i in p["items"]))
    expect(panel.get_by_role("button", name="Retry step")).to_have_count(0)


def test_a_step_not_safe_to_run_twice_offers_no_retry(page: Page, org: Org) -> None:
    adjust = {
        "action": "adjustInventoryLevel",
        "params": {"inventory_item_id": 1, "available_adjustment": -3},
    }
    task_id = failed_task(org, adjust, "high")
    login(page, org, org.expert, f"/workspace/tasks/{task_id}/work")
    panel = page.locator("#decide")
    expect(panel).to_contain_text("not safe to run twice")
    expect(page.locator("#failure-reason")).to_have_text(REASON)
    expect(panel.get_by_role("button", name="Retry step")).to_have_count(0)
