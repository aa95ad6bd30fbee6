"""Reopening an expired decision from the workspace (issue 15, item 8): the detail view of
a step whose decision expired, in a task that waits for a reopening (the default
`onExpiry: AwaitReopen`), offers "Reopen with a new deadline" to a user with
`run.control` only; after it, the step can be approved there."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from tests.browser.support import Org
from tests.browser.test_queue import login

EXPIRES_FAST = {"decisionDeadlineSeconds": 3, "escalation": {"maxEscalations": 0}}


def _expired(task: dict[str, object]) -> bool:
    steps = task["status"].get("steps") or []  # type: ignore[attr-defined]
    return any(s.get("state") == "Expired" for s in steps)


def test_an_expert_reopens_an_expired_decision_and_approves_it(page: Page, org: Org) -> None:
    made = org.task(policy=EXPIRES_FAST)
    org.wait(made["id"], _expired)
    detail = f"/workspace/tasks/{made['id']}/refund"

    login(page, org, org.viewer, detail)  # tasks.read: sees why, no control
    panel = page.locator("#decide")
    expect(panel).to_contain_text("Task expired")
    expect(panel.get_by_role("button", name="Reopen with a new deadline")).to_have_count(0)
    page.get_by_role("button", name="Log out").click()

    login(page, org, org.expert, detail)
    expect(panel).to_contain_text("Task expired")
    panel.get_by_role("button", name="Reopen with a new deadline").click()
    expect(page.locator("#notice")).to_contain_text("Reopened")
    org.wait(made["id"], lambda t: not _expired(t) and bool(t["status"].get("nextDeadline")))
    page.reload()
    approve = panel.get_by_role("button", name="Approve", exact=True)
    expect(approve).to_be_visible()
    approve.click()
    org.wait(made["id"], lambda t: bool(t["status"]["steps"][0].get("decision")))
