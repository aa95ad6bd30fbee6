"""A draft reply in the workspace, in headless Chromium (issue 14, item 1): the org's agent
(a process, offline responder) drafts a low-confidence reply; the queue lists it as a
reply; its page shows the client message, the redacted thread and the draft; the lead
edits and sends it, and the edit is in the conversation."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from humanwork_dev.processes import AgentProcess, PlatformProcess
from tests.agents import provision_agent
from tests.browser.support import Org
from tests.browser.test_queue import login

EDITED = "Order 1042 left our warehouse yesterday and will arrive on Friday."


@pytest.fixture
def agent(org: Org, platform_server: PlatformProcess, tmp_path: Path) -> Iterator[AgentProcess]:
    """The org's AgentInstance `agent`, running as a local process the platform reaches."""
    provision_agent(org.cluster, org.namespace, org.id)
    process = AgentProcess(
        org.cluster.kubeconfig, org.namespace, "agent", tmp_path / "agent", platform_server.url
    )
    process.start()
    endpoints = platform_server.workdir / "agent-endpoints.json"
    known = json.loads(endpoints.read_text())
    endpoints.write_text(json.dumps({**known, f"{org.namespace}/agent": process.url}))
    try:
        yield process
    finally:
        process.stop()


def test_an_expert_edits_and_sends_a_draft_reply(
    page: Page, org: Org, agent: AgentProcess, artifacts: Path
) -> None:
    conversation = org.conversation(
        "Order 1042",
        [("customer", "jane@example.com", "Where is my order 1042? Call me on +44 20 7946 0958.")],
    )
    r = org.http.post(
        f"/orgs/{org.id}/conversations/{conversation}/replies",
        json={"agent": "agent"},
        headers=org.requester.headers,
    )
    assert r.status_code == 201, r.text
    draft = r.json()
    assert draft["state"] == "pending", draft

    login(page, org, org.lead)
    row = page.locator(f'#queue-body tr[data-id="replies/{draft["id"]}"]')
    expect(row).to_contain_text("Draft: ")
    expect(
        row.get_by_role("link", name="Where is my order 1042? Call me on [phone].", exact=True)
    ).to_be_visible()
    row.get_by_role("link", name=re.compile("^Review the draft reply to")).click()
    expect(page).to_have_url(f"{org.url}/workspace/replies/{draft['id']}")
    expect(page.locator("#client-message")).to_have_text(
        "Where is my order 1042? Call me on [phone]."
    )
    expect(page.locator("#reply-draft")).to_have_text(draft["draft"])
    expect(page.locator("#thread li")).to_have_count(1)
    expect(page.locator("#thread")).not_to_contain_text("jane@example.com")
    expect(page.locator("#facts")).to_contain_text("30%")
    page.screenshot(path=str(artifacts / "reply.png"), full_page=True)

    # an empty edit is refused on the page, the field marked, nothing sent
    reply = page.get_by_label("Reply to send")
    reply.fill("  ")
    page.get_by_role("button", name="Send my edit").click()
    expect(page.locator("#reply-error")).to_have_text("Write the reply to send.")
    expect(reply).to_have_attribute("aria-invalid", "true")
    reply.fill(EDITED)
    page.get_by_role("button", name="Send my edit").click()
    expect(reply).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#notice")).to_have_text("Sent your edit to the client.")
    expect(page.locator("#reply-form")).to_be_hidden()
    expect(page.locator("#thread li")).to_have_count(2)
    expect(page.locator("#thread li").nth(1)).to_contain_text(EDITED)
    sent = org.http.get(f"/human-tasks/replies/{draft['id']}", headers=org.viewer.headers).json()
    assert sent["state"] == "sent" and sent["sent_text"] == EDITED
    assert sent["decided_by"] == org.lead.username


def test_a_viewer_sees_the_draft_without_controls(
    page: Page, org: Org, agent: AgentProcess
) -> None:
    conversation = org.conversation("Returns", [("customer", "bob", "How do returns work?")])
    r = org.http.post(
        f"/orgs/{org.id}/conversations/{conversation}/replies",
        json={"agent": "agent"},
        headers=org.requester.headers,
    )
    assert r.status_code == 201, r.text
    login(page, org, org.viewer, f"/workspace/replies/{r.json()['id']}")
    expect(page.locator("#reply-draft")).to_have_text(r.json()["draft"])
    expect(page.locator("#reply-meta")).to_contain_text("pending")
    expect(page.locator("#reply-form")).to_be_hidden()
