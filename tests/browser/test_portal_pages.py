"""The client portal's pages and script as served (no browser, no database: these routes
use neither): the workspace's security headers, nothing inline or from a CDN, path values
validated, the script writing API values as text only, nothing in the OpenAPI document."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from platform_api.app import create_app
from tests.platform.conftest import make_settings

ORG = "6f1c2b9e-2d8a-4c55-9a57-0e4f3d2b1a90"
CONVERSATION = "0b8f6a51-7d3c-4f7e-9c1a-2d5e8f9a0b1c"


@pytest.fixture
async def web() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings("sqlite+aiosqlite:///:memory:"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://platform") as client:
        yield client


async def test_portal_pages_are_shells_with_the_workspace_policy(web: httpx.AsyncClient) -> None:
    workspace = await web.get("/workspace/login")
    for path in (
        "/portal/login",
        "/portal/conversations",
        f"/portal/orgs/{ORG}/conversations/{CONVERSATION}",
    ):
        r = await web.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        for header in ("content-security-policy", "x-frame-options", "referrer-policy"):
            assert r.headers[header] == workspace.headers[header], (path, header)
        assert "default-src 'none'" in r.headers["content-security-policy"]
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-store"
        assert "<script" not in r.text.split("</head>")[1]  # no inline script in the body
        assert "https://" not in r.text and "http://" not in r.text  # nothing from a CDN
        assert "/workspace/static/portal.js?v=" in r.text
        assert "/workspace/static/app.css?v=" in r.text  # the workspace's design
        assert "/workspace/static/app.js" not in r.text  # the experts' script is not loaded
    r = await web.get(f"/portal/orgs/{ORG}/conversations/{CONVERSATION}")
    assert f'data-org="{ORG}" data-conversation="{CONVERSATION}"' in r.text
    r = await web.get("/portal", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/portal/conversations"


async def test_portal_path_values_are_validated(web: httpx.AsyncClient) -> None:
    for bad in (
        f"/portal/orgs/{ORG}/conversations/x<script>",
        f'/portal/orgs/"><img src=x>/conversations/{CONVERSATION}',
    ):
        r = await web.get(bad)
        assert r.status_code == 422, bad
        assert "<img" not in r.text and "<script>" not in r.text
    r = await web.get(f"/portal/orgs/{ORG}/conversations/{uuid.uuid4()}")
    assert r.status_code == 200


async def test_the_portal_script(web: httpx.AsyncClient) -> None:
    r = await web.get("/workspace/static/portal.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in r.text and "insertAdjacentHTML" not in r.text
    assert "eval(" not in r.text
    assert "message.internal === true" in r.text  # internal notes dropped in the page too
    again = await web.get(
        "/workspace/static/portal.js", headers={"If-None-Match": r.headers["etag"]}
    )
    assert again.status_code == 304


async def test_the_portal_is_not_in_the_openapi_document(web: httpx.AsyncClient) -> None:
    r = await web.get("/openapi.json")
    assert not [path for path in r.json()["paths"] if path.startswith("/portal")]
