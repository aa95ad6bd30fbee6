"""The expert workspace's queue page in headless Chromium, against the running platform."""

from __future__ import annotations

import re
from pathlib import Path

from playwright.sync_api import Page, expect

from tests.browser.support import EXPIRES_AFTER_THE_PAGE_SHOWS, EXPIRY_WAIT, STEP, Org, User


def login(page: Page, org: Org, user: User, path: str = "/workspace/tasks") -> None:
    """Open `path`, get sent to the login page, log in and land back on `path`."""
    page.goto(f"{org.url}{path}")
    expect(page).to_have_url(re.compile(r"/workspace/login\?next="))
    expect(page.get_by_label("Username")).to_be_focused()
    page.get_by_label("Username").fill(user.username)
    page.get_by_label("Password").fill(user.password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(re.compile(re.escape(path.split("?")[0])))
    expect(page.locator("#user-name")).to_have_text(user.username)


def rows(page: Page) -> list[str]:
    return [row.get_attribute("data-id") or "" for row in page.locator("#queue-body tr").all()]


def badge(page: Page) -> str:
    return page.locator("#pending-count").inner_text()


def test_login_shows_the_queue_deadline_first(page: Page, org: Org, artifacts: Path) -> None:
    later = org.task(policy={"decisionDeadlineSeconds": 7200})
    soon = org.task(policy={"decisionDeadlineSeconds": 300}, description="Refund order 7 now")
    middle = org.task(policy={"decisionDeadlineSeconds": 3600})

    # a wrong password is refused with a message, and the form keeps the focus
    page.goto(f"{org.url}/workspace/login")
    page.get_by_label("Username").fill(org.expert.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    expect(page.get_by_label("Password")).to_be_focused()

    login(page, org, org.expert)
    expect(page.locator("#queue-body tr")).to_have_count(3)
    ids = [f"{t['id']}/refund" for t in (soon, middle, later)]
    assert rows(page) == ids
    expect(page.locator("#pending-count")).to_have_text("3")

    first = page.locator(f'#queue-body tr[data-id="{ids[0]}"]')
    expect(first.get_by_role("link", name="Refund order 7 now")).to_have_attribute(
        "href", f"/workspace/tasks/{ids[0]}"
    )
    expect(first.locator(".pill.pending")).to_have_text("pending")
    expect(first.locator(".pill.warn")).to_have_text("due soon")
    expect(first.locator(".risk")).to_have_text("high")
    expect(first.locator("code")).to_have_attribute("title", soon["uid"])
    expect(first).to_contain_text("shop")  # the workflow
    expect(first).to_contain_text(STEP["description"])
    for other in ids[1:]:
        expect(page.locator(f'#queue-body tr[data-id="{other}"] .pill.warn')).to_have_count(0)

    # the near-deadline toast, once per task: not again after a reload
    toast = page.locator(".toast.warn")
    expect(toast).to_have_count(1)
    expect(toast).to_contain_text("Refund order 7 now")
    page.screenshot(path=str(artifacts / "queue.png"), full_page=True)
    # the positive control: a task that came due while the screen was stale (no stream, no
    # polling) is toasted after the reload, in the same pass that would toast the first
    # one again
    page.goto(f"{org.url}/workspace/tasks?poll=60&stream=off")
    expect(page.locator("#queue-body tr")).to_have_count(3)
    newer = org.task(policy={"decisionDeadlineSeconds": 300}, description="Refund order 8 now")
    page.reload()
    expect(page.locator("#queue-body tr")).to_have_count(4)
    expect(page.locator(".toast.warn")).to_have_count(1)
    expect(page.locator(".toast.warn")).to_contain_text("Refund order 8 now")
    expect(page.locator(".toast.warn")).not_to_contain_text("Refund order 7 now")
    assert f"{newer['id']}/refund" in rows(page)

    # readable on a narrow screen: no horizontal scrolling, rows as cards
    page.set_viewport_size({"width": 400, "height": 800})
    expect(first.get_by_role("button", name=re.compile("^Approve"))).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 400
    page.screenshot(path=str(artifacts / "queue-narrow.png"), full_page=True)


def test_live_updates_and_the_badge(page: Page, org: Org) -> None:
    first = org.task()
    login(page, org, org.expert, "/workspace/tasks?poll=1")
    expect(page.locator("#queue-body tr")).to_have_count(1)
    expect(page.locator("#pending-count")).to_have_text("1")

    # a new task appears without a reload; a decision made elsewhere removes its row
    second = org.task(policy={"decisionDeadlineSeconds": 60})
    expect(page.locator("#queue-body tr")).to_have_count(2)
    expect(page.locator("#pending-count")).to_have_text("2")
    # deadline first: the second task's 60 s ahead of the first's default, once its step's
    # deadline is in its status (the row may come a moment before it)
    expect(page.locator("#queue-body tr").first).to_have_attribute(
        "data-id", f"{second['id']}/refund"
    )
    r = org.http.post(
        f"/agentic/tasks/{first['id']}/steps/refund/approve", json={}, headers=org.expert2.headers
    )
    assert r.status_code == 200, r.text
    expect(page.locator("#queue-body tr")).to_have_count(1)
    expect(page.locator("#pending-count")).to_have_text("1")


def test_approve_and_reject_from_the_row(page: Page, org: Org) -> None:
    a = org.task(policy={"decisionDeadlineSeconds": 600})
    b = org.task(policy={"decisionDeadlineSeconds": 1200})
    c = org.task(policy={"decisionDeadlineSeconds": 1800})
    login(page, org, org.expert)
    expect(page.locator("#queue-body tr")).to_have_count(3)

    row = page.locator(f'#queue-body tr[data-id="{a["id"]}/refund"]')
    row.get_by_role("button", name=re.compile("^Approve")).click()
    expect(page.locator("#notice")).to_contain_text("Approved")
    expect(row).to_have_count(0)
    expect(page.locator("#pending-count")).to_have_text("2")
    decision = org.step_entry(a["id"], "refund")["decision"]
    assert (decision["verdict"], decision["by"]) == ("approve", org.expert.username)
    assert decision["idempotencyKey"].startswith("web-")

    # reject: the dialog takes the focus, wants feedback, and Escape gives the focus back
    row = page.locator(f'#queue-body tr[data-id="{b["id"]}/refund"]')
    reject = row.get_by_role("button", name=re.compile("^Reject"))
    reject.focus()
    page.keyboard.press("Enter")
    dialog = page.get_by_role("dialog", name="Reject")
    expect(dialog).to_be_visible()
    feedback = dialog.get_by_label("Feedback for the agent (required)")
    expect(feedback).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(reject).to_be_focused()
    assert "decision" not in org.step_entry(b["id"], "refund")

    reject.click()
    dialog.get_by_role("button", name="Reject").click()
    expect(dialog.get_by_role("alert")).to_have_text("Feedback is required to reject.")
    expect(feedback).to_be_focused()
    feedback.fill("wrong order: the vase was order 1043")
    dialog.get_by_role("button", name="Reject").click()
    expect(dialog).to_be_hidden()
    expect(page.locator("#notice")).to_contain_text("Rejected")
    expect(row).to_have_count(0)
    expect(page.locator("#pending-count")).to_have_text("1")
    decision = org.step_entry(b["id"], "refund")["decision"]
    assert decision["verdict"] == "reject"
    assert decision["feedback"] == "wrong order: the vase was order 1043"
    assert rows(page) == [f"{c['id']}/refund"]


def test_a_decision_past_the_deadline_says_task_expired(page: Page, org: Org) -> None:
    late = org.task(
        policy={
            "decisionDeadlineSeconds": EXPIRES_AFTER_THE_PAGE_SHOWS,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        },
        description="Refund before it is too late",
    )
    other = org.task()
    # no polling and no live stream during the test: the row stays on screen after its deadline
    login(page, org, org.expert, "/workspace/tasks?poll=60&stream=off")  # a stale screen
    expect(page.locator("#queue-body tr")).to_have_count(2)
    org.wait(late["id"], lambda t: t["phase"] == "Expired", within=EXPIRY_WAIT)
    row = page.locator(f'#queue-body tr[data-id="{late["id"]}/refund"]')
    row.get_by_role("button", name=re.compile("^Approve")).click()
    expect(page.locator("#message")).to_contain_text("Task expired")
    expect(page.locator("#message")).to_contain_text("Refund before it is too late")
    # and the queue was refreshed: the expired task is gone
    expect(row).to_have_count(0)
    assert rows(page) == [f"{other['id']}/refund"]
    expect(page.locator("#pending-count")).to_have_text("1")


def test_bulk_approve_a_mix_including_an_expired_task(
    page: Page, org: Org, artifacts: Path
) -> None:
    fine = [org.task(policy={"decisionDeadlineSeconds": 900}) for _ in range(2)]
    expiring = org.task(
        policy={
            "decisionDeadlineSeconds": EXPIRES_AFTER_THE_PAGE_SHOWS,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        }
    )
    keep = org.task(policy={"decisionDeadlineSeconds": 1800})
    login(page, org, org.expert, "/workspace/tasks?poll=60&stream=off")  # a stale screen
    expect(page.locator("#queue-body tr")).to_have_count(4)
    expect(page.locator("#pending-count")).to_have_text("4")

    # select-all, then untick one: the header checkbox goes indeterminate
    page.get_by_label("Select all tasks").check()
    expect(page.locator("#selected-count")).to_have_text("4 selected")
    page.locator(f'#queue-body tr[data-id="{keep["id"]}/refund"] input[type=checkbox]').uncheck()
    expect(page.locator("#selected-count")).to_have_text("3 selected")
    assert page.locator("#select-all").evaluate("el => el.indeterminate") is True

    org.wait(expiring["id"], lambda t: t["phase"] == "Expired", within=EXPIRY_WAIT)
    page.get_by_role("button", name="Approve selected").click()
    banner = page.locator("#bulk-result")
    expect(banner).to_be_visible()
    expect(page.locator("#bulk-summary")).to_have_text("Approve selected: 2 succeeded / 1 failed")
    expect(page.locator("#bulk-summary")).to_be_focused()
    reason = banner.locator('li[data-code="human_task_expired"]')
    expect(reason).to_contain_text("human_task_expired: 1")
    expect(reason).to_contain_text("task expired")
    page.screenshot(path=str(artifacts / "queue-bulk.png"), full_page=True)

    # the queue refreshed: only the unselected task is left, and the badge says so
    expect(page.locator("#queue-body tr")).to_have_count(1)
    expect(page.locator("#pending-count")).to_have_text("1")
    for made in fine:
        assert org.step_entry(made["id"], "refund")["decision"]["by"] == org.expert.username
    assert "decision" not in org.step_entry(expiring["id"], "refund")

    # reject the rest in bulk, with feedback from the dialog
    page.get_by_label("Select all tasks").check()
    page.get_by_role("button", name="Reject selected").click()
    dialog = page.get_by_role("dialog", name="Reject")
    dialog.get_by_label("Feedback for the agent (required)").fill("not this week")
    dialog.get_by_role("button", name="Reject").click()
    expect(page.locator("#bulk-summary")).to_have_text("Reject selected: 1 succeeded / 0 failed")
    expect(page.locator("#queue-empty")).to_be_visible()
    expect(page.locator("#pending-count")).to_have_text("0")
    assert org.step_entry(keep["id"], "refund")["decision"]["feedback"] == "not this week"


def test_controls_follow_the_capabilities(page: Page, org: Org) -> None:
    org.task()
    login(page, org, org.viewer)
    expect(page.locator("#queue-body tr")).to_have_count(1)
    expect(page.locator("#user-role")).to_have_text("viewer")
    expect(page.get_by_role("button", name=re.compile("^(Approve|Reject)"))).to_have_count(0)
    expect(page.locator("#queue-body input[type=checkbox]")).to_have_count(0)
    expect(page.locator("#bulkbar")).to_be_hidden()
    expect(page.get_by_label("Select all tasks")).to_be_hidden()
    # the server refuses anyway
    r = org.http.post(
        "/human-tasks/bulk-resume",
        json={"ids": rows(page), "action": "approve"},
        headers=org.viewer.headers,
    )
    assert r.status_code == 403 and r.json()["code"] == "forbidden"

    page.get_by_role("button", name="Log out").click()
    expect(page).to_have_url(re.compile("/workspace/login"))
    page.goto(f"{org.url}/workspace/tasks")
    expect(page).to_have_url(re.compile("/workspace/login"))  # the token is gone

    # the requester may not approve its own task: its row offers the details and Reject
    login(page, org, org.requester)
    row = page.locator("#queue-body tr")
    expect(row).to_have_count(1)
    expect(row.get_by_role("button", name=re.compile("^Approve"))).to_have_count(0)
    expect(row.get_by_role("link", name=re.compile("^Details"))).to_be_visible()
    expect(row.get_by_role("button", name=re.compile("^Reject"))).to_be_visible()
