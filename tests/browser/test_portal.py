"""The client portal (`/portal`) in headless Chromium, against the running platform: a
client signs in, lists its conversations, starts one, posts messages that appear live,
never sees an expert's internal note, meets "not found" for another org's conversation,
and reads the page at a phone's width without scrolling sideways. Screenshots of the
desktop and phone layouts go to docs/images/."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client as kclient
from playwright.sync_api import Page, expect

from tests.browser.portal_support import (
    DOCS_IMAGES,
    Client,
    add_client,
    client_login,
    conversation_of,
    no_horizontal_overflow,
    phone,
)
from tests.browser.support import Org, make_org

SAID = '#messages li:not([data-author-kind="system"])'
"""The messages people and the agent wrote (the platform's updates about the dispatch of
the client's message, which has no agent here, come and go beside them)."""
LIVE_MS = 15_000
"""The stream brings a change well within this; the fallback polls every five seconds."""


@pytest.fixture
def client_a(org: Org) -> Client:
    return add_client(org, "client-a")


@pytest.fixture
def client_b(org: Org) -> Client:
    return add_client(org, "client-b")


@pytest.fixture
def other_org(org: Org) -> Iterator[Org]:
    other = make_org(org.http, org.cluster)
    try:
        yield other
    finally:
        try:
            kclient.CoreV1Api(org.cluster.api).delete_namespace(other.namespace)
        except kclient.ApiException as exc:
            if exc.status != 404:
                raise


def test_sign_in_list_and_start_a_conversation(page: Page, org: Org, client_a: Client) -> None:
    older = conversation_of(org, client_a, "Invoice for March", "Where is my March invoice?")
    # a wrong password is refused, the form keeps the focus
    page.goto(f"{org.url}/portal/login")
    page.get_by_label("Username").fill(client_a.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("Wrong username or password.")
    expect(page.get_by_label("Password")).to_be_focused()

    client_login(page, org, client_a, "/portal/conversations")
    expect(page.locator("#conversations li")).to_have_count(1)
    expect(page.locator(f'#conversations li[data-id="{older}"] a')).to_have_text(
        "Invoice for March"
    )
    expect(page.locator("#user-org")).to_contain_text("Shop ")

    # a subject is required
    page.get_by_role("button", name="Start the conversation").click()
    expect(page.locator("#new-error")).to_have_text("Give the conversation a subject.")
    expect(page.get_by_label("Subject")).to_be_focused()

    page.get_by_label("Subject").fill("Refund for order 1042")
    page.get_by_label("Your message").fill("The vase arrived broken; please refund it.")
    page.get_by_role("button", name="Start the conversation").click()
    expect(page).to_have_url(re.compile(rf"/portal/orgs/{org.id}/conversations/[0-9a-f-]{{36}}$"))
    expect(page.locator("#conversation-title")).to_have_text("Refund for order 1042")
    first = page.locator(SAID).first
    expect(first).to_contain_text("The vase arrived broken; please refund it.")
    expect(first.locator(".who")).to_have_text("You")

    # the list shows both, the newest activity first
    page.get_by_role("link", name="Conversations").first.click()
    expect(page.locator("#conversations li")).to_have_count(2)
    expect(page.locator("#conversations li a").first).to_have_text("Refund for order 1042")


def test_messages_arrive_live_and_internal_notes_never_show(
    page: Page, org: Org, client_a: Client, artifacts: Path
) -> None:
    cid = conversation_of(org, client_a, "Stock of blue mugs", "How many blue mugs are left?")
    client_login(page, org, client_a, f"/portal/orgs/{org.id}/conversations/{cid}")
    expect(page.locator("body")).to_have_attribute("data-live", "stream")
    expect(page.locator(SAID)).to_have_count(1)
    page.evaluate("window.__sameDocument = true")

    # an expert's internal note: stored (the expert reads it back), never in the portal
    note = "INTERNAL: this client disputes every invoice, check twice"
    r = org.http.post(
        f"/orgs/{org.id}/conversations/{cid}/notes",
        json={"content": note},
        headers=org.expert.headers,
    )
    assert r.status_code == 201, r.text
    r = org.http.get(f"/orgs/{org.id}/conversations/{cid}", headers=org.expert.headers)
    assert note in [m["content"] for m in r.json()["messages"]]  # positive control
    # then a reply the client may see: it arrives live, the note before it never does
    r = org.http.post(
        f"/conversations/{cid}/messages",
        json={"role": "agent", "author": "shop-agent", "content": "There are 14 blue mugs."},
        headers=org.admin.headers,
    )
    assert r.status_code == 201, r.text
    expect(page.locator(SAID)).to_have_count(2, timeout=LIVE_MS)
    expect(page.locator(SAID).last).to_contain_text("There are 14 blue mugs.")
    expect(page.locator(SAID).last.locator(".who")).to_have_text("shop-agent (Agent)")
    assert note not in page.content()
    assert page.evaluate("window.__sameDocument") is True  # no reload

    # the client writes; the message is stored as the client's
    page.get_by_label("Your message").fill("Thanks, please reserve 10 for me.")
    page.get_by_role("button", name="Send").click()
    expect(page.locator(SAID)).to_have_count(3)
    expect(page.locator(SAID).last.locator(".who")).to_have_text("You")
    expect(page.get_by_label("Your message")).to_have_value("")
    r = org.http.get(f"/orgs/{org.id}/conversations/{cid}", headers=org.expert.headers)
    # the platform may have added its own note since (the client's message went to an agent
    # this world does not run): the last message of a person or an agent is the client's
    said = [m for m in r.json()["messages"] if m["author_kind"] != "system"]
    last = said[-1]
    assert last["content"] == "Thanks, please reserve 10 for me."
    assert last["author_kind"] == "client" and last["author"] == client_a.username
    page.reload()  # and a fresh load does not bring the note either
    expect(page.locator(SAID)).to_have_count(3)
    assert note not in page.content()
    page.screenshot(path=str(DOCS_IMAGES / "portal-conversation.png"), full_page=True)
    page.screenshot(path=str(artifacts / "portal-conversation.png"), full_page=True)


def test_another_orgs_conversation_is_not_found(
    page: Page, org: Org, other_org: Org, client_a: Client
) -> None:
    mine = conversation_of(org, client_a, "Mine", "My own question")
    theirs = other_org.conversation("Theirs", [("customer", "someone", "Their secret order")])
    client_login(page, org, client_a, f"/portal/orgs/{org.id}/conversations/{mine}")
    expect(page.locator(SAID)).to_have_count(1)  # positive control
    for path in (
        f"/portal/orgs/{other_org.id}/conversations/{theirs}",
        f"/portal/orgs/{org.id}/conversations/{theirs}",
    ):
        page.goto(f"{org.url}{path}")
        expect(page.locator("#conversation-title")).to_have_text("Conversation not found")
        expect(page.get_by_role("alert")).to_contain_text("Not found")
        expect(page.locator("#conversation-body")).to_be_hidden()
        assert "Their secret order" not in page.content() and "Theirs" not in page.content()


def test_another_clients_conversation_is_not_found(
    page: Page, org: Org, client_a: Client, client_b: Client
) -> None:
    theirs = conversation_of(org, client_b, "B's order", "B's private question")
    client_login(page, org, client_a, "/portal/conversations")
    expect(page.locator("#conversations-empty")).to_be_visible()
    page.goto(f"{org.url}/portal/orgs/{org.id}/conversations/{theirs}")
    expect(page.locator("#conversation-title")).to_have_text("Conversation not found")
    assert "B's private question" not in page.content()


def test_phone_width_has_no_horizontal_scroll(
    page: Page, org: Org, client_a: Client, artifacts: Path
) -> None:
    long_word = "x" * 180
    cid = conversation_of(org, client_a, f"A long subject {long_word}", f"See {long_word}")
    phone(page)
    client_login(page, org, client_a, "/portal/conversations")
    expect(page.locator("#conversations li")).to_have_count(1)
    no_horizontal_overflow(page)
    page.screenshot(path=str(DOCS_IMAGES / "portal-list-phone.png"), full_page=True)
    page.goto(f"{org.url}/portal/orgs/{org.id}/conversations/{cid}")
    expect(page.locator(SAID)).to_have_count(1)
    no_horizontal_overflow(page)
    page.screenshot(path=str(DOCS_IMAGES / "portal-conversation-phone.png"), full_page=True)
    page.screenshot(path=str(artifacts / "portal-conversation-phone.png"), full_page=True)
