"""The workspace's pages and assets as served (no browser, no database: these routes use
neither): security headers, escaping, the static files and nothing else."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from platform_api.app import create_app
from tests.platform.conftest import make_settings


@pytest.fixture
async def web() -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings("sqlite+aiosqlite:///:memory:"))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://platform") as client:
        yield client


async def test_pages_are_shells_with_a_strict_policy(web: httpx.AsyncClient) -> None:
    for path in (
        "/workspace/login",
        "/workspace/tasks",
        "/workspace/tasks/org-a/task-1/refund",
        "/workspace/agents",
    ):
        r = await web.get(path)
        assert r.status_code == 200, path
        assert r.headers["content-type"] == "text/html; charset=utf-8"
        policy = r.headers["content-security-policy"]
        assert "script-src 'self'" in policy and "default-src 'none'" in policy
        assert "frame-ancestors 'none'" in policy
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-store"
        assert "<script" not in r.text.split("</head>")[1]  # no inline script in the body
        assert "https://" not in r.text and "http://" not in r.text  # nothing from a CDN
        assert '<html lang="en">' in r.text
    r = await web.get("/workspace/tasks/org-a/task-1/refund")
    assert 'data-namespace="org-a" data-name="task-1" data-step="refund"' in r.text
    r = await web.get("/workspace", follow_redirects=False)
    assert r.status_code == 303 and r.headers["location"] == "/workspace/tasks"


async def test_path_values_are_validated_and_escaped(web: httpx.AsyncClient) -> None:
    r = await web.get("/workspace/tasks/org-a/Task<script>/x")
    assert r.status_code == 422
    r = await web.get('/workspace/tasks/org-a/task-1/"><img src=x onerror=alert(1)>')
    assert r.status_code == 200
    assert "<img" not in r.text and "&lt;img" in r.text and "&quot;&gt;" in r.text


async def test_static_assets(web: httpx.AsyncClient) -> None:
    r = await web.get("/workspace/static/app.js")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/javascript")
    assert "innerHTML" not in r.text  # API values go into the page as text only
    etag = r.headers["etag"]
    again = await web.get("/workspace/static/app.js", headers={"If-None-Match": etag})
    assert again.status_code == 304
    r = await web.get("/workspace/static/app.css")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/css")
    for bad in ("/workspace/static/secret.py", "/workspace/static/..%2Frouter.py"):
        r = await web.get(bad)
        assert r.status_code == 404 and r.json()["code"] == "not_found"


async def test_the_workspace_is_not_in_the_openapi_document(web: httpx.AsyncClient) -> None:
    r = await web.get("/openapi.json")
    assert not [path for path in r.json()["paths"] if path.startswith("/workspace")]
