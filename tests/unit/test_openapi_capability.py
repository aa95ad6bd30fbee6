"""The platform's OpenAPI document says who each operation opens to in `x-capability`
(platform_api/openapi.py), from the access checks the routes declare: tools read it there
instead of parsing the prose of the descriptions."""

from __future__ import annotations

import re
from typing import Any

import pytest

from humanwork_dev.deployables import openapi
from platform_api.floor.capabilities import known
from platform_api.openapi import AGENT_SIGNATURE, AGENT_TOKEN, EXTENSION, PLATFORM_ADMIN

OPEN_TO_ANY_USER = {
    ("get", "/healthz"),
    ("post", "/auth/token"),
    ("get", "/users/me"),
    ("get", "/v1/receipt-keys"),
}
"""No access check of a role: health, signing in, the caller's own account, and the public
keys receipts verify against."""


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    return openapi()


def operations(document: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (method, path): operation
        for path, methods in document["paths"].items()
        for method, operation in methods.items()
    }


def test_every_operation_but_the_open_ones_names_who_it_opens_to(
    document: dict[str, Any],
) -> None:
    found = operations(document)
    unnamed = {key for key, operation in found.items() if EXTENSION not in operation}
    assert unnamed == OPEN_TO_ANY_USER
    reserved = {PLATFORM_ADMIN, AGENT_TOKEN, AGENT_SIGNATURE}
    for key, operation in found.items():
        if key in OPEN_TO_ANY_USER:
            continue
        capabilities = operation[EXTENSION]
        assert capabilities and set(capabilities) <= known() | reserved, (key, capabilities)


def test_the_extension_agrees_with_what_each_description_says(document: dict[str, Any]) -> None:
    """The descriptions open with who may call; the extension names the same."""
    for key, operation in operations(document).items():
        description = operation.get("description", "")
        named = set(operation.get(EXTENSION, []))
        if description.startswith("Platform administrators only"):
            assert named == {PLATFORM_ADMIN}, key
        elif description.startswith("Agent token"):
            assert named == {AGENT_TOKEN}, key
        elif description.startswith("Authenticated by the HMAC"):
            assert named == {AGENT_SIGNATURE}, key
        elif description.startswith("Capability"):
            first = re.split(r"\.(?:\s|$)", description, maxsplit=1)[0]
            said = set(re.findall(r"`([a-z_]+\.[a-z_]+)`", first))
            assert said and said == named - {PLATFORM_ADMIN}, (key, said, named)


def test_a_check_made_in_the_handler_is_declared_on_the_route(document: dict[str, Any]) -> None:
    """Creating a task checks `run.control` in the org its body names, not in a
    dependency; deactivating a user checks in the service. Both declare it."""
    found = operations(document)
    assert found[("post", "/agentic/tasks")][EXTENSION] == ["run.control"]
    assert found[("post", "/users/{username}/deactivate")][EXTENSION] == [
        "users.manage",
        PLATFORM_ADMIN,
    ]
