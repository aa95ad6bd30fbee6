"""The detail view of a waiting decision in headless Chromium: the request prompt, the whole
plan with decisions and execution results, the redacted thread, and the richer decisions
(edit, provide, select)."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.support import STEP, Org
from tests.browser.test_queue import login

LOOK = {
    "id": "look",
    "description": "Look up order 1042 in Shopify",
    "kind": "action",
    "tool": "shopify_query",
    "parameters": {"order": 1042},
    "risk": "low",
}


def test_details_show_the_plan_and_thread_and_edit_parameters(
    page: Page, org: Org, artifacts: Path
) -> None:
    conversation = org.conversation(
        "The vase arrived broken",
        [
            ("customer", "jane@example.com", "My vase is broken, call me on +44 20 7946 0958."),
            ("agent", "shop-agent", "Sorry to hear that, I will arrange a refund."),
        ],
    )
    made = org.task(
        steps=[LOOK, STEP],
        conversationId=conversation,
        description="Refund the damaged vase of order 1042",
    )
    task_id = made["id"]
    r = org.http.post(
        f"/agentic/tasks/{task_id}/steps/look/approve", json={}, headers=org.expert2.headers
    )
    assert r.status_code == 200, r.text
    org.record_execution(task_id, "look", {"order": 1042, "total": "49.90", "items": 1})
    org.wait_queue(lambda p: any(i["id"] == f"{task_id}/refund" for i in p["items"]))

    login(page, org, org.lead)
    page.get_by_role("link", name="Refund the damaged vase of order 1042").click()
    expect(page).to_have_url(f"{org.url}/workspace/tasks/{task_id}/refund")
    expect(page.locator("#prompt")).to_have_text("Refund the damaged vase of order 1042")
    expect(page.get_by_role("heading", level=1)).to_contain_text("step refund")

    plan = page.locator("#plan > li")
    expect(plan).to_have_count(2)
    look, refund = plan.nth(0), plan.nth(1)
    expect(look).to_contain_text("Look up order 1042 in Shopify")
    expect(look.locator(".risk")).to_have_text("low")
    expect(look.locator(".decision")).to_contain_text(f"Approved by {org.expert2.username}")
    expect(look.locator(".execution")).to_contain_text("Succeeded")
    expect(look.locator(".execution pre")).to_contain_text('"total": "49.90"')
    expect(refund).to_have_attribute("aria-current", "step")
    expect(refund.locator(".risk")).to_have_text("high")
    expect(refund).to_contain_text("shopify_refund")
    expect(refund.locator("pre.parameters")).to_contain_text('"amount": "49.90"')

    thread = page.locator("#thread")
    # the people's messages (the platform's own follow each step: "(system)")
    expect(thread.locator("li").filter(has_not_text="(system)")).to_have_count(2)
    expect(thread).to_contain_text("[email] (customer)")
    expect(thread).to_contain_text("call me on [phone]")
    expect(thread).not_to_contain_text("jane@example.com")
    expect(page.locator("#redactions")).to_contain_text("redacted")
    page.screenshot(path=str(artifacts / "details.png"), full_page=True)

    # amended parameters: text stays text, numbers and booleans are JSON
    form = page.locator("#edit-form")
    expect(form.get_by_role("button", name="Approve with these parameters")).to_be_visible()
    order = form.get_by_label("order", exact=True)
    order.fill("ten forty-two")
    form.get_by_role("button", name="Approve with these parameters").click()
    expect(order).to_be_focused()
    expect(order).to_have_attribute("aria-invalid", "true")
    error = page.locator(f"#{order.get_attribute('aria-describedby')}")
    expect(error).to_contain_text("Not valid JSON")
    assert "decision" not in org.step_entry(task_id, "refund")
    order.fill("1042")
    form.get_by_label("amount", exact=True).fill("39.90")
    form.get_by_label("Note for the agent (optional)").fill("partial refund: the lid survived")
    form.get_by_role("button", name="Approve with these parameters").click()
    expect(page.locator("#notice")).to_have_text("Approved with edited parameters.")
    expect(page.locator("#decide-title")).to_be_focused()
    expect(page.locator("#decide-body")).to_contain_text("This step has its decision")
    expect(page.locator("#edit-form")).to_have_count(0)
    decision = org.step_entry(task_id, "refund")["decision"]
    assert decision["verdict"] == "edit" and decision["by"] == org.lead.username
    assert decision["parameters"] == {"order": 1042, "amount": "39.90", "notify": True}
    assert decision["feedback"] == "partial refund: the lid survived"
    expect(refund.locator(".decision")).to_contain_text("Approved with edited parameters")

    # the execution result appears as the agent reports it, without a reload
    page.goto(f"{org.url}/workspace/tasks/{task_id}/refund?poll=1")
    expect(refund.locator(".execution")).to_have_count(0)
    org.record_execution(task_id, "refund", {"refunded": "39.90", "refund_id": "rf_7"})
    expect(refund.locator(".execution")).to_contain_text("Succeeded")
    expect(refund.locator(".execution pre")).to_contain_text('"refund_id": "rf_7"')

    # narrow screens get one column
    page.set_viewport_size({"width": 400, "height": 800})
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    page.screenshot(path=str(artifacts / "details-narrow.png"), full_page=True)


def test_input_steps_are_answered_by_select_and_provide(page: Page, org: Org) -> None:
    choose = {
        "id": "choose",
        "description": "Refund or replace the vase?",
        "kind": "input",
        "options": ["refund", "replace"],
        "risk": "low",
    }
    answer = {
        "id": "reply",
        "description": "Write the reply to the customer",
        "kind": "input",
        "risk": "medium",
    }
    chosen = org.task(steps=[choose], policy={"decisionDeadlineSeconds": 1200})
    written = org.task(steps=[answer], policy={"decisionDeadlineSeconds": 2400})
    login(page, org, org.lead)
    expect(page.locator("#queue-body tr")).to_have_count(2)
    # an input step has no fast-path approval: its row leads to the detail view
    row = page.locator(f'#queue-body tr[data-id="{chosen["id"]}/choose"]')
    expect(row.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
    row.get_by_role("link", name=re.compile("^Answer")).click()
    expect(page).to_have_url(re.compile(f"/workspace/tasks/{chosen['id']}/choose$"))

    group = page.get_by_role("group", name="Choose one option")
    page.get_by_role("button", name="Select").click()
    expect(page.locator("#select-form [role=alert]")).to_have_text("Choose an option first.")
    group.get_by_label("replace").check()
    page.get_by_role("button", name="Select").click()
    expect(page.locator("#notice")).to_have_text("Selected: replace.")
    decision = org.step_entry(chosen["id"], "choose")["decision"]
    assert (decision["verdict"], decision["selection"]) == ("select", "replace")

    page.goto(f"{org.url}/workspace/tasks/{written['id']}/reply")
    page.get_by_label("Your answer").fill("Dear Jane, a new vase is on its way.")
    page.get_by_role("button", name="Provide").click()
    expect(page.locator("#notice")).to_have_text("Input provided.")
    decision = org.step_entry(written["id"], "reply")["decision"]
    assert decision["verdict"] == "provide"
    assert decision["input"] == {"text": "Dear Jane, a new vase is on its way."}


def test_detail_controls_follow_the_capabilities(page: Page, org: Org) -> None:
    made = org.task()
    detail = f"/workspace/tasks/{made['id']}/refund"
    # an expert (run.control, the one capability of every decision) approves, rejects
    # and edits
    login(page, org, org.expert, detail)
    panel = page.locator("#decide")
    expect(panel.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    expect(panel.get_by_role("button", name="Reject…")).to_be_visible()
    expect(page.locator("#edit-form")).to_have_count(1)
    page.get_by_role("button", name="Log out").click()

    # the requester may reject its own task but not approve it
    login(page, org, org.requester, detail)
    expect(panel).to_contain_text("another expert must approve it")
    expect(panel.get_by_role("button", name="Reject…")).to_be_visible()
    expect(panel.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
    page.get_by_role("button", name="Log out").click()

    # a viewer reads
    login(page, org, org.viewer, detail)
    expect(panel).to_contain_text("may read this task but not decide it")
    expect(panel.get_by_role("button")).to_have_count(0)
    expect(page.locator("#plan > li")).to_have_count(1)


def test_a_decision_in_the_detail_view_past_the_deadline(page: Page, org: Org) -> None:
    # the page must be open before the deadline passes: long enough for a sign-in on a
    # loaded machine (4 s was not), and the wait for the expiry is on the task's phase
    made = org.task(
        policy={
            "decisionDeadlineSeconds": 30,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        }
    )
    login(
        page, org, org.expert, f"/workspace/tasks/{made['id']}/refund?poll=60&stream=off"
    )  # a stale screen
    approve = page.locator("#decide").get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_visible()
    org.wait(made["id"], lambda t: t["phase"] == "Expired", within=120)
    approve.click()
    expect(page.locator("#message")).to_have_text(
        "Task expired: the decision deadline passed, so it can no longer be decided."
    )
    expect(page.locator("#decide-body")).to_contain_text("Task expired")
    expect(page.locator("#facts .pill").first).to_have_text("expired")


def test_a_lead_cancels_a_task_from_the_detail_view(page: Page, org: Org) -> None:
    made = org.task()
    detail = f"/workspace/tasks/{made['id']}/refund"
    login(page, org, org.viewer, detail)  # tasks.read only: no cancel control
    panel = page.locator("#decide")
    expect(panel).to_contain_text("may read this task but not decide it")
    expect(panel.get_by_role("button", name="Cancel task")).to_have_count(0)
    page.get_by_role("button", name="Log out").click()

    login(page, org, org.lead, detail)
    page.once("dialog", lambda dialog: dialog.accept())
    panel.get_by_role("button", name="Cancel task").click()
    expect(page.locator("#notice")).to_contain_text("Cancel requested")
    org.wait(made["id"], lambda t: t["phase"] == "Cancelled")
    expect(panel).to_contain_text("The task ended (Cancelled)", timeout=15_000)
    expect(panel.get_by_role("button", name="Cancel task")).to_have_count(0)


def test_an_unknown_outcome_is_resolved_from_the_queue_and_the_detail_view(
    page: Page, org: Org, artifacts: Path
) -> None:
    """Issue 12 item 4 for experts: a step whose approved call may or may not have taken
    effect is not approvable again; the expert checks upstream and says which."""
    made = org.task()
    task_id = made["id"]
    r = org.http.post(
        f"/agentic/tasks/{task_id}/steps/refund/approve", json={}, headers=org.expert2.headers
    )
    assert r.status_code == 200, r.text
    org.record_execution(
        task_id, "refund", None, state="OutcomeUnknown", error="tool_call_outcome_unknown"
    )
    org.wait_queue(
        lambda p: any(
            i["id"] == f"{task_id}/refund" and i["status"] == "outcome_unknown" for i in p["items"]
        )
    )

    login(page, org, org.expert)
    row = page.locator(f'tr[data-id="{task_id}/refund"]')
    expect(row.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
    row.get_by_role("link", name=re.compile("^Resolve")).click()
    expect(page).to_have_url(f"{org.url}/workspace/tasks/{task_id}/refund")
    panel = page.locator("#decide")
    expect(panel).to_contain_text("Outcome unknown")
    expect(page.locator("#facts .pill").first).to_have_text("outcome_unknown")
    page.locator("#resolve-note").fill("no refund in the payment history")
    page.screenshot(path=str(artifacts / "detail-outcome-unknown.png"), full_page=True)
    panel.get_by_role("button", name="Mark as not executed and retry").click()
    expect(page.locator("#notice")).to_contain_text("marked as not executed")
    entry = org.step_entry(task_id, "refund")
    resolution = entry["resolution"]
    assert (resolution["outcome"], resolution["by"], resolution["attempt"]) == (
        "not_applied",
        org.expert.username,
        1,
    )
    assert resolution["note"] == "no refund in the payment history"
    expect(panel.get_by_role("button", name="Mark as executed")).to_have_count(0)
