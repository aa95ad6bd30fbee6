"""One JSON error shape everywhere (our errors, FastAPI's validation errors, unknown
routes, wrong methods) and an OpenAPI document that describes it all with examples."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.platform.conftest import Api, TwoOrgs

SHAPE = {"code", "message", "details"}


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/no-such-route", 404, "not_found"),
        ("GET", "/orgs/x/y/z", 404, "not_found"),
        ("DELETE", "/healthz", 405, "method_not_allowed"),
        ("PATCH", "/orgs", 405, "method_not_allowed"),
        ("GET", "/auth/token", 405, "method_not_allowed"),
        ("GET", "/orgs", 401, "unauthenticated"),
    ],
)
async def test_framework_errors_have_the_shape(
    client: httpx.AsyncClient, method: str, path: str, status: int, code: str
) -> None:
    r = await client.request(method, path)
    assert r.status_code == status
    assert r.headers["content-type"] == "application/json"
    assert set(r.json()) == SHAPE and r.json()["code"] == code
    assert isinstance(r.json()["message"], str) and r.json()["message"]


async def test_validation_errors_have_the_shape(
    client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    h = two_orgs.admin.headers  # creating an org is a platform administrator's
    cases: list[tuple[str, str, Any, list[Any]]] = [
        ("POST", "/auth/token", {"username": "admin"}, ["body", "password"]),
        ("POST", "/orgs", {"slug": "ok"}, ["body", "name"]),
        ("GET", "/orgs/not-a-uuid", None, ["path", "org_id"]),
        ("GET", "/audit?limit=abc", None, ["query", "limit"]),
    ]
    for method, path, body, loc in cases:
        r = await client.request(method, path, json=body, headers=h)
        assert r.status_code == 422, path
        data = r.json()
        assert set(data) == SHAPE and data["code"] == "validation_failed"
        assert loc in [e["loc"] for e in data["details"]["errors"]], data
    raw = await client.post(
        "/orgs", content=b"{not json", headers={**h, "content-type": "application/json"}
    )
    assert raw.status_code == 422 and raw.json()["code"] == "validation_failed"


async def test_healthz(client: httpx.AsyncClient) -> None:
    r = await client.get("/healthz")
    assert r.status_code == 200 and r.json() == {"status": "ok", "database": "ok"}


async def test_openapi_is_complete(client: httpx.AsyncClient, api: Api) -> None:
    doc = (await client.get("/openapi.json")).json()
    paths = doc["paths"]
    expected = {
        ("post", "/auth/token"),
        ("post", "/orgs"),
        ("get", "/orgs"),
        ("get", "/orgs/{org_id}"),
        ("post", "/users"),
        ("get", "/users/me"),
        ("get", "/audit"),
        ("get", "/orgs/{org_id}/tool-permissions"),
        ("put", "/orgs/{org_id}/tool-permissions/{tool_name}"),
        ("get", "/orgs/{org_id}/integrations"),
        ("put", "/orgs/{org_id}/integrations/{integration_type}"),
        ("delete", "/orgs/{org_id}/integrations/{integration_type}"),
        ("get", "/healthz"),
        ("get", "/v1/agent-api/whoami"),
        ("post", "/v1/agent-api/token/refresh"),
    }
    found = {(m, p) for p, ops in paths.items() for m in ops}
    assert expected <= found
    schemas = doc["components"]["schemas"]
    assert "HTTPValidationError" not in schemas  # FastAPI's own shape is replaced everywhere
    assert set(schemas["ErrorBody"]["required"]) == {"code", "message"}
    for method, path in expected:
        op = paths[path][method]
        assert op.get("summary") and op.get("description"), (method, path)
        errors = {s: r for s, r in op["responses"].items() if s.startswith(("4", "5"))}
        assert errors, (method, path)
        for status, response in errors.items():
            content = response["content"]["application/json"]
            if status != "422" or "example" in content:
                assert content["schema"]["$ref"].endswith("/ErrorBody"), (method, path, status)
        public = path in ("/auth/token", "/healthz")
        assert ("security" in op) is not public, (method, path)
        ok = next(r for s, r in op["responses"].items() if s.startswith("2"))
        if "content" in ok:
            ref = ok["content"]["application/json"]["schema"]
            name = (ref.get("$ref") or ref.get("items", {}).get("$ref", "")).rsplit("/", 1)[-1]
            if name:
                assert schemas[name].get("examples"), name
        if "requestBody" in op:
            ref = op["requestBody"]["content"]["application/json"]["schema"]["$ref"]
            assert schemas[ref.rsplit("/", 1)[-1]].get("examples"), (method, path)
    assert doc["components"]["securitySchemes"]["HTTPBearer"]["scheme"] == "bearer"
