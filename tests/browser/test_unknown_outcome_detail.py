"""The workspace's panel for a step whose outcome is unknown, in headless Chromium: what
the platform knows (request sent at, the upstream, the attempt, the read-back, the proxy's
claim) and the two choices with what each does; the expert marks it executed, and a
viewer sees the same facts with no choice to make."""

from __future__ import annotations

from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.support import Org
from tests.browser.test_queue import login

WRITE = {
    "id": "fix",
    "description": "Lower HW-MUG-001 at the warehouse by 3",
    "kind": "action",
    "tool": "shopify",
    "parameters": {
        "action": "adjustInventoryLevel",
        "params": {"location_id": 1, "inventory_item_id": 2, "available_adjustment": -3},
    },
    "risk": "high",
}


def unknown_task(org: Org) -> str:
    """A task whose approved write `fix` ended with an unknown outcome; its id."""
    task_id: str = org.task(steps=[WRITE], description="Fix the mug's stock")["id"]
    r = org.http.post(
        f"/agentic/tasks/{task_id}/steps/fix/approve", json={}, headers=org.expert2.headers
    )
    assert r.status_code == 200, r.text
    org.record_execution(
        task_id, "fix", None, state="OutcomeUnknown", error="tool_call_outcome_unknown"
    )
    org.wait_queue(
        lambda p: any(
            i["id"] == f"{task_id}/fix" and i["status"] == "outcome_unknown" for i in p["items"]
        )
    )
    return task_id


def test_the_panel_shows_what_is_known_and_the_two_choices(
    page: Page, org: Org, artifacts: Path
) -> None:
    task_id = unknown_task(org)
    login(page, org, org.expert, f"/workspace/tasks/{task_id}/fix")
    panel = page.locator("#decide")
    expect(panel).to_contain_text("Outcome unknown")
    facts = page.locator("#unknown-facts")
    expect(facts.locator("#unknown-upstream")).to_have_text("shopify · adjustInventoryLevel")
    expect(facts.locator("#unknown-attempt")).to_have_text("1")
    expect(facts.locator("#unknown-sent")).not_to_have_text("not recorded")
    expect(facts.locator("#unknown-readback")).to_contain_text("not_available")
    expect(facts.locator("#unknown-readback")).to_contain_text("check the upstream yourself")
    expect(facts.locator("#unknown-ledger")).to_have_text("absent")
    choices = page.locator("#unknown-choices li")
    expect(choices).to_have_count(2)
    expect(choices.nth(0)).to_contain_text("Mark as executed:")
    expect(choices.nth(0)).to_contain_text("the step completes")
    expect(choices.nth(1)).to_contain_text("Mark as not executed and retry:")
    expect(choices.nth(1)).to_contain_text("it happens twice")
    page.screenshot(path=str(artifacts / "unknown-outcome-panel.png"), full_page=True)

    page.locator("#resolve-note").fill("the admin shows the change")
    panel.get_by_role("button", name="Mark as executed").click()
    expect(page.locator("#notice")).to_contain_text("marked as executed")
    resolution = org.step_entry(task_id, "fix")["resolution"]
    assert (resolution["outcome"], resolution["by"]) == ("applied", org.expert.username)
    assert resolution["note"] == "the admin shows the change"


def test_a_viewer_sees_the_facts_and_no_choice_to_make(page: Page, org: Org) -> None:
    task_id = unknown_task(org)
    login(page, org, org.viewer, f"/workspace/tasks/{task_id}/fix")
    panel = page.locator("#decide")
    expect(page.locator("#unknown-upstream")).to_have_text("shopify · adjustInventoryLevel")
    expect(panel).to_contain_text("may read this task but not resolve it")
    expect(panel.get_by_role("button")).to_have_count(0)
    # and the API refuses the viewer's resolution (the page offering none is not the guard)
    r = org.http.post(
        f"/human-tasks/{task_id}/fix/resolve",
        json={"outcome": "not_applied"},
        headers=org.viewer.headers,
    )
    assert r.status_code == 403, r.text
    assert org.step_entry(task_id, "fix").get("resolution") is None
