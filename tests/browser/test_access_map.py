"""The access map in the workspace, in headless Chromium: a platform administrator sees
every role's capabilities, changes one and saves (in effect at the next request), and is
told why a map giving a role the platform administrators' `access.manage` is refused; a
viewer and the org's own admin get neither the page's data nor its navigation link."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, expect

from tests.browser.support import Org, User
from tests.browser.test_queue import login
from tests.platform.conftest import ADMIN_PASSWORD


def platform_admin(org: Org) -> User:
    """The bootstrap platform administrator, logged in."""
    r = org.http.post("/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD})
    assert r.status_code == 200, r.text
    return User("admin", ADMIN_PASSWORD, "admin", r.json()["access_token"])


@pytest.fixture
def restored(org: Org) -> Iterator[dict[str, list[str]]]:
    """The access map as it was; put back afterwards (the server is shared)."""
    root = platform_admin(org).headers
    r = org.http.get("/access-map", headers=root)
    assert r.status_code == 200, r.text
    before: dict[str, list[str]] = r.json()["roles"]
    yield before
    r = org.http.put("/access-map", json={"roles": before}, headers=root)
    assert r.status_code == 200, r.text


def test_an_admin_changes_the_access_map_and_a_viewer_cannot(
    page: Page, org: Org, restored: dict[str, list[str]]
) -> None:
    for refused in (org.viewer, org.admin):  # the org's admin is no platform administrator
        login(page, org, refused, "/workspace/access")
        expect(page.locator("#message")).to_contain_text("may not read the access map")
        expect(page.locator("#nav-access")).to_be_hidden()
        expect(page.locator("#access-form")).to_be_hidden()
        page.get_by_role("button", name="Log out").click()

    root = platform_admin(org)
    login(page, org, root, "/workspace/access")
    expect(page.locator("#nav-access")).to_be_visible()
    audit = page.get_by_label("viewer: audit.read")
    expect(audit).not_to_be_checked()
    expect(page.get_by_label("expert: run.control")).to_be_checked()
    audit.check()
    page.get_by_role("button", name="Save access map").click()
    expect(page.locator("#notice")).to_contain_text("Access map saved")
    assert org.http.get("/audit", headers=org.viewer.headers).status_code == 200

    # giving a role the platform administrators' capability is refused, nothing changes
    page.get_by_label("admin: access.manage").check()
    page.get_by_role("button", name="Save access map").click()
    expect(page.locator("#message")).to_contain_text("platform_capability")
    expect(page.get_by_label("admin: access.manage")).not_to_be_checked()
    r = org.http.get("/access-map", headers=root.headers)
    assert r.json()["roles"] == {**restored, "viewer": sorted([*restored["viewer"], "audit.read"])}
