"""The workspace's queue updated by the live event stream (`GET /human-tasks/events`) in
headless Chromium: no reload and no polling (the poll interval is a minute), and back to
polling when the stream cannot be had."""

from __future__ import annotations

from playwright.sync_api import Page, Route, expect

from tests.browser.support import Org
from tests.browser.test_queue import login, rows

WITHIN_MS = 10_000
"""Well under the minute between two polls: only the stream can bring a change this fast."""


def test_the_queue_follows_the_event_stream_without_a_reload(page: Page, org: Org) -> None:
    first = org.task()
    login(page, org, org.expert, "/workspace/tasks?poll=60")
    expect(page.locator("#queue-body tr")).to_have_count(1)
    expect(page.locator("body")).to_have_attribute("data-live", "stream")
    page.evaluate("window.__sameDocument = true")

    second = org.task(policy={"decisionDeadlineSeconds": 60})
    expect(page.locator("#queue-body tr")).to_have_count(2, timeout=WITHIN_MS)
    expect(page.locator("#pending-count")).to_have_text("2", timeout=WITHIN_MS)
    assert rows(page)[0] == f"{second['id']}/refund"

    # a decision made elsewhere removes its row
    r = org.http.post(
        f"/agentic/tasks/{first['id']}/steps/refund/approve", json={}, headers=org.expert2.headers
    )
    assert r.status_code == 200, r.text
    expect(page.locator("#queue-body tr")).to_have_count(1, timeout=WITHIN_MS)
    expect(page.locator("#pending-count")).to_have_text("1", timeout=WITHIN_MS)
    assert page.evaluate("window.__sameDocument") is True  # never reloaded


def test_without_the_stream_the_queue_falls_back_to_polling(page: Page, org: Org) -> None:
    def refuse(route: Route) -> None:  # a proxy in front of the platform without the stream
        route.fulfill(status=404, content_type="application/json", body='{"code":"not_found"}')

    page.route("**/human-tasks/events", refuse)
    org.task()
    login(page, org, org.expert, "/workspace/tasks?poll=1")
    expect(page.locator("#queue-body tr")).to_have_count(1)
    expect(page.locator("body")).to_have_attribute("data-live", "polling")
    org.task(policy={"decisionDeadlineSeconds": 60})
    expect(page.locator("#queue-body tr")).to_have_count(2, timeout=WITHIN_MS)
