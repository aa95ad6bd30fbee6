"""What the client portal's browser tests share: clients of an org (users with the built-in
role `client`, created through the API by the platform's administrator), signing in to
the portal, conversations a client started, the phone's viewport and its overflow check."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import client as kclient
from playwright.sync_api import Page, expect

from humanwork_core.requester import REQUESTER_ANNOTATION
from tests.browser.support import Org, _login, until
from tests.platform.conftest import ADMIN_PASSWORD

expect.set_options(timeout=20_000)  # a loaded two-core machine: pages take a while
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
PHONE = {"width": 375, "height": 740}


@dataclass
class Client:
    """A client of the org, signed in through the API."""

    username: str
    password: str
    token: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def add_client(org: Org, key: str) -> Client:
    """A user with the role `client` in `org`, made by the platform's administrator."""
    root = {"Authorization": f"Bearer {_login(org.http, 'admin', ADMIN_PASSWORD)}"}
    username = f"{key}-{org.namespace}"
    password = f"pw-{username}-0123456789"
    r = org.http.post(
        "/users",
        json={"username": username, "password": password, "role": "client", "org_ids": [org.id]},
        headers=root,
    )
    assert r.status_code == 201, r.text
    return Client(username, password, _login(org.http, username, password))


def conversation_of(org: Org, client: Client, subject: str, message: str) -> str:
    """A conversation the client started with its first message; its id, once the
    platform's dispatch of that message ended with its update in the conversation (no
    agent answers in the browser stack): that update is the conversation's latest activity
    before the test's own, never one landing in the middle of what the test looks at."""
    r = org.http.post(
        f"/orgs/{org.id}/conversations",
        json={"subject": subject, "message": message},
        headers=client.headers,
    )
    assert r.status_code == 201, r.text
    cid: str = r.json()["id"]
    until(lambda: told(org, client, cid, "dispatch_failed"), bool)
    return cid


def told(org: Org, client: Client, cid: str, event: str) -> list[dict[str, Any]]:
    """The system messages of `event` the platform wrote in the client's conversation (from
    its own loops: the dispatch of a client's message, the task watch)."""
    r = org.http.get(f"/orgs/{org.id}/conversations/{cid}", headers=client.headers)
    assert r.status_code == 200, r.text
    return [m for m in r.json()["messages"] if (m.get("meta") or {}).get("event") == event]


def client_login(page: Page, org: Org, client: Client, path: str) -> None:
    """Open `path`, get sent to the portal's sign-in, sign in and land back on `path`."""
    DOCS_IMAGES.mkdir(parents=True, exist_ok=True)
    page.goto(f"{org.url}{path}")
    expect(page).to_have_url(re.compile(r"/portal/login\?next="))
    expect(page.get_by_label("Username")).to_be_focused()
    page.get_by_label("Username").fill(client.username)
    page.get_by_label("Password").fill(client.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page).to_have_url(re.compile(re.escape(path.split("?")[0]) + r"(\?|$)"))
    expect(page.locator("#user-name")).to_have_text(client.username)


def phone(page: Page) -> None:
    page.set_viewport_size(PHONE)


def no_horizontal_overflow(page: Page) -> None:
    """Nothing wider than the viewport: the page does not scroll sideways."""
    widths = page.evaluate(
        "() => ({view: document.documentElement.clientWidth,"
        " doc: document.documentElement.scrollWidth, body: document.body.scrollWidth})"
    )
    assert widths["doc"] <= widths["view"] and widths["body"] <= widths["view"], widths


READ = {
    "id": "list-orders",
    "description": "List October's Amazon orders",
    "kind": "action",
    "tool": "amazon",
    "parameters": {"action": "listOrders", "created_after": "2026-10-01"},
    "risk": "low",
}
WRITE = {
    "id": "fix-stock",
    "description": "Lower the blue mug's Shopify stock by 3",
    "kind": "action",
    "tool": "shopify",
    "parameters": {
        "action": "adjustInventoryLevel",
        "params": {"location_id": 1, "inventory_item_id": 7, "available_adjustment": -3},
    },
    "risk": "high",
}


def client_task(org: Org, client: Client, cid: str, steps: list[dict[str, Any]]) -> str:
    """A task started from the client's conversation, as the agent files it for the client's
    message and the platform binds it (written here as the cluster admin: the requester
    the platform vouches for, and a waiting confirmation on each high-risk action step, the
    record the platform writes when it binds a client's plan); its `namespace/name` once
    the operator gave it a deadline and the platform told the conversation that its first
    step waits for an expert (from its task watch; so that update never lands among what
    the test looks at, as `conversation_of` waits for the dispatch's)."""
    name = f"portal-{uuid.uuid4().hex[:8]}"
    kclient.CustomObjectsApi(org.cluster.api).create_namespaced_custom_object(
        "humanwork.io",
        "v1alpha1",
        org.namespace,
        "agentictasks",
        {
            "apiVersion": "humanwork.io/v1alpha1",
            "kind": "AgenticTask",
            "metadata": {"name": name, "annotations": {REQUESTER_ANNOTATION: client.username}},
            "spec": {
                "orgId": org.id,
                "agentRef": {"name": "shop"},
                "description": "Reconcile October's Amazon orders with Shopify's stock",
                "requestedBy": client.username,
                "conversationId": cid,
                "steps": steps,
            },
        },
    )
    task_id = f"{org.namespace}/{name}"
    org.wait(task_id, lambda t: bool(t["status"].get("nextDeadline")))
    until(lambda: told(org, client, cid, "step_waiting"), bool)
    high = [s["id"] for s in steps if s.get("kind") == "action" and s["risk"] in HIGH]
    if high:
        require_confirmation(org, name, high)
    return task_id


HIGH = ("high", "critical")
"""The risks an org's clients confirm by default (`client_confirm_risks` unset)."""


def require_confirmation(org: Org, name: str, step_ids: list[str]) -> None:
    """Record a waiting confirmation on each step, as the platform does for a client's plan."""
    api = kclient.CustomObjectsApi(org.cluster.api)
    for _ in range(20):  # the operator writes the status too: retry on a conflict
        raw = api.get_namespaced_custom_object(
            "humanwork.io", "v1alpha1", org.namespace, "agentictasks", name
        )
        entries = raw["status"]["steps"]
        for entry in entries:
            if entry["id"] in step_ids:
                entry["confirmation"] = {"required": True, "state": "waiting"}
        patch = {
            "metadata": {"resourceVersion": raw["metadata"]["resourceVersion"]},
            "status": {"steps": entries},
        }
        try:
            api.patch_namespaced_custom_object_status(
                "humanwork.io", "v1alpha1", org.namespace, "agentictasks", name, patch
            )
            return
        except kclient.ApiException as exc:
            if exc.status != 409:
                raise
    raise AssertionError(f"could not record the confirmations of {name}")


def tab_to(page: Page, selector: str, presses: int = 80) -> None:
    """Press Tab until `selector` has the focus, and check the focus is visible."""
    target = page.locator(selector)
    for _ in range(presses):
        page.keyboard.press("Tab")
        if target.evaluate("node => node === document.activeElement"):
            outline = target.evaluate(
                "node => { const s = getComputedStyle(node);"
                " return [s.outlineStyle, s.outlineWidth]; }"
            )
            assert outline[0] != "none" and outline[1] != "0px", (selector, outline)
            return
    raise AssertionError(f"Tab never reached {selector}")
