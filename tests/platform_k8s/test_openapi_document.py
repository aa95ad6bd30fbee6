"""Issue 18: the OpenAPI document is one that tools can use. It validates with an
independent validator (openapi-spec-validator), every `$ref` in it resolves inside the
document, and a maintained generator (openapi-python-client, from PyPI) makes a client of
it without a warning, whose calls work against the running platform (a real process on
the real control plane and PostgreSQL)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openapi_spec_validator import validate

from humanwork_dev.processes import PlatformProcess
from tests.fuzz.refs import unresolvable
from tests.platform.conftest import ADMIN_PASSWORD

GENERATOR = Path(sys.executable).parent / "openapi-python-client"


def test_references_are_found_and_checked() -> None:
    """The checker itself: a `#/$defs/` reference inside a path is unresolvable."""
    document = {
        "paths": {"/x": {"schema": {"$ref": "#/$defs/EventType"}}},
        "components": {"schemas": {"A": {"$ref": "#/components/schemas/B"}, "B": {}}},
    }
    assert unresolvable(document) == ["#/$defs/EventType"]


@pytest.fixture(scope="module")
def document(platform_server: PlatformProcess) -> dict[str, Any]:
    answer = httpx.get(f"{platform_server.url}/openapi.json", timeout=30)
    assert answer.status_code == 200
    served: dict[str, Any] = answer.json()
    return served


def test_the_served_document_validates_and_resolves(document: dict[str, Any]) -> None:
    validate(document)  # raises on an invalid document
    assert unresolvable(document) == []
    events = document["paths"]["/v1/agent-events"]["post"]["requestBody"]
    schema = events["content"]["application/json"]["schema"]
    assert "task.plan_ready" in schema["properties"]["event_type"]["enum"]


def test_the_checked_in_document_is_the_served_one(document: dict[str, Any]) -> None:
    checked_in = json.loads(Path("docs/openapi.json").read_text())
    assert unresolvable(checked_in) == []
    assert checked_in["paths"].keys() == document["paths"].keys()


def generate_client(document: dict[str, Any], folder: Path, package: str) -> str:
    """Generate a client package `package` in `folder`; the generator's output."""
    (folder / "openapi.json").write_text(json.dumps(document))
    (folder / "config.yaml").write_text("post_hooks: []\n")
    done = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(folder / "openapi.json"),
            "--meta",
            "none",
            "--output-path",
            str(folder / package),
            "--config",
            str(folder / "config.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def test_a_generated_client_calls_the_running_api(
    document: dict[str, Any], platform_server: PlatformProcess, tmp_path: Path
) -> None:
    package = f"humanwork_client_{tmp_path.name.replace('-', '_')}"
    said = generate_client(document, tmp_path, package)
    assert "Warning" not in said and "will not be generated" not in said, said
    # the operation the unresolvable reference used to drop
    assert (
        tmp_path / package / "api" / "agent_api" / "agent_event_v1_agent_events_post.py"
    ).exists()

    sys.path.insert(0, str(tmp_path))
    try:
        client_mod = importlib.import_module(f"{package}.client")
        login = importlib.import_module(f"{package}.api.auth.issue_token_auth_token_post")
        me = importlib.import_module(f"{package}.api.users.me_users_me_get")
        models = importlib.import_module(f"{package}.models")
    finally:
        sys.path.remove(str(tmp_path))

    anonymous = client_mod.Client(base_url=platform_server.url)
    token = login.sync(
        client=anonymous,
        body=models.TokenRequest(username="admin", password=ADMIN_PASSWORD),
    )
    assert isinstance(token, models.TokenResponse), token
    wrong = login.sync(
        client=anonymous, body=models.TokenRequest(username="admin", password="not-it-0123")
    )
    assert isinstance(wrong, models.ErrorBody) and wrong.code == "unauthenticated"

    authenticated = client_mod.AuthenticatedClient(
        base_url=platform_server.url, token=token.access_token
    )
    caller = me.sync(client=authenticated)
    assert isinstance(caller, models.Me), caller
    # the platform administrator's own capability, whatever orgs earlier tests made (the
    # capabilities of a role come with an org, and this server may have none yet)
    assert caller.username == "admin" and caller.platform_admin is True
    assert "access.manage" in caller.capabilities


def _resolve(document: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and "$ref" in node:
        target: Any = document
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def unbounded(document: dict[str, Any], schema: Any, where: str) -> Iterator[str]:
    """The places in `schema` without the bounds of their type: a string without a
    maximum length (or a format, pattern or enum), a number without a minimum and a
    maximum, an array without a maximum of items."""
    schema = _resolve(document, schema)
    if not isinstance(schema, dict):
        return
    for key in ("anyOf", "oneOf", "allOf"):
        for part in schema.get(key, []):
            yield from unbounded(document, part, where)
    kind = schema.get("type")
    fixed = any(k in schema for k in ("enum", "const", "format", "pattern"))
    if kind == "string" and "maxLength" not in schema and not fixed:
        yield f"{where}: a string without maxLength"
    limits = "minimum" in schema and "maximum" in schema
    if kind in ("integer", "number") and not fixed and not limits:
        yield f"{where}: a number without minimum and maximum"
    if kind == "array":
        if "maxItems" not in schema:
            yield f"{where}: an array without maxItems"
        yield from unbounded(document, schema.get("items", {}), f"{where}[]")
    for name, part in (schema.get("properties") or {}).items():
        yield from unbounded(document, part, f"{where}.{name}")


def test_every_parameter_and_body_field_declares_its_bounds(document: dict[str, Any]) -> None:
    found = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            label = f"{method.upper()} {path}"
            for p in operation.get("parameters", []):
                found += unbounded(document, p["schema"], f"{label} {p['in']} {p['name']}")
            for media in (operation.get("requestBody") or {}).get("content", {}).values():
                found += unbounded(document, media["schema"], f"{label} body")
    assert found == []
