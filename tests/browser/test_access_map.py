"""The access map in the workspace (issue 15, item 7), in headless Chromium: an admin
(`access.manage`) sees every role's capabilities, changes one and saves (in effect at the
next request), and is told why a map that would lock everyone out is refused; a viewer
gets neither the page's data nor its navigation link."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import Org
from tests.browser.test_queue import login


@pytest.fixture
def restored(org: Org) -> Iterator[dict[str, list[str]]]:
    """The access map as it was; put back afterwards (the server is shared)."""
    r = org.http.get("/access-map", headers=org.admin.headers)
    assert r.status_code == 200, r.text
    before: dict[str, list[str]] = r.json()["roles"]
    yield before
    r = org.http.put("/access-map", json={"roles": before}, headers=org.admin.headers)
    assert r.status_code == 200, r.text


def test_an_admin_changes_the_access_map_and_a_viewer_cannot(
    page: Page, org: Org, restored: dict[str, list[str]]
) -> None:
    login(page, org, org.viewer, "/workspace/access")
    expect(page.locator("#message")).to_contain_text("may not read the access map")
    expect(page.locator("#nav-access")).to_be_hidden()
    expect(page.locator("#access-form")).to_be_hidden()
    page.get_by_role("button", name="Log out").click()

    login(page, org, org.admin, "/workspace/access")
    expect(page.locator("#nav-access")).to_be_visible()
    audit = page.get_by_label("viewer: audit.read")
    expect(audit).not_to_be_checked()
    expect(page.get_by_label("expert: run.control")).to_be_checked()
    audit.check()
    page.get_by_role("button", name="Save access map").click()
    expect(page.locator("#notice")).to_contain_text("Access map saved")
    assert org.http.get("/audit", headers=org.viewer.headers).status_code == 200

    # taking access.manage from the only role that holds it is refused, nothing changes
    page.get_by_label("admin: access.manage").uncheck()
    page.get_by_role("button", name="Save access map").click()
    expect(page.locator("#message")).to_contain_text("access_map_lockout")
    expect(page.get_by_label("admin: access.manage")).to_be_checked()
    r = org.http.get("/access-map", headers=org.admin.headers)
    assert r.json()["roles"] == {**restored, "viewer": ["audit.read", "tasks.read"]}
