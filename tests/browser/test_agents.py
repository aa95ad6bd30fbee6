"""The workspace's agents page (issue 15, item 2) in headless Chromium, against the
running platform and operator: an org admin sees each agent of their orgs with its health,
as the platform reports it; a user without `agents.manage` is not offered the page."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubernetes import client as kclient
from playwright.sync_api import Page, expect

from tests.agents import LLM_KEY, instance_manifest
from tests.browser.support import Org, until
from tests.browser.test_queue import login


def ready_agent(org: Org, name: str = "shop") -> dict[str, Any]:
    """An agent created through the platform, once the operator made it Ready."""
    kclient.CoreV1Api(org.cluster.api).create_namespaced_secret(
        org.namespace,
        kclient.V1Secret(
            metadata=kclient.V1ObjectMeta(name="llm"), string_data={"api-key": LLM_KEY}
        ),
    )
    spec = instance_manifest(org.namespace, org.id)["spec"]
    r = org.http.post(
        f"/orgs/{org.id}/agents", json={"name": name, "spec": spec}, headers=org.admin.headers
    )
    assert r.status_code == 201, r.text

    def read() -> dict[str, Any]:
        got = org.http.get(f"/orgs/{org.id}/agents/{name}", headers=org.admin.headers)
        assert got.status_code == 200, got.text
        return dict(got.json())

    return until(read, lambda a: a["health"]["phase"] == "Ready", within=60)


def test_an_org_admin_sees_the_agents_health(page: Page, org: Org, artifacts: Path) -> None:
    ready_agent(org)
    org.task()  # one open task of agent `shop`

    login(page, org, org.admin, "/workspace/agents")
    expect(page.locator("#nav-agents")).to_have_attribute("aria-current", "page")
    row = page.locator(f'#agents-body tr[data-id="{org.namespace}/shop"]')
    expect(row).to_be_visible()
    expect(row.locator(".pill.ok").first).to_have_text("Ready")
    expect(row.locator(".ready")).to_have_text("1/1")
    expect(row.locator(".open-tasks")).to_have_text("1")
    expect(row.locator(".heartbeat")).to_have_text("never")
    expect(row.locator(".token time")).to_contain_text("in ")
    expect(row.locator(".config")).to_have_text("pending")
    expect(page.locator("#agents-meta")).to_contain_text("1 agent")
    page.screenshot(path=str(artifacts / "agents.png"), full_page=True)

    # the agent goes away: the page follows without a reload
    gone = org.http.delete(f"/orgs/{org.id}/agents/shop", headers=org.admin.headers)
    assert gone.status_code == 204, gone.text
    expect(page.locator("#agents-body tr")).to_have_count(0)
    expect(page.locator("#agents-empty")).to_be_visible()


def test_an_expert_is_not_offered_the_agents_page(page: Page, org: Org) -> None:
    login(page, org, org.expert)
    expect(page.locator("#nav-review")).to_be_visible()
    expect(page.locator("#nav-agents")).to_be_hidden()
