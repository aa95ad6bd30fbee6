"""Helpers for the platform's OpenAPI document.

`body_schema(model)` is a pydantic model's JSON schema for an `openapi_extra` request
body: FastAPI copies such a schema into the document as it is, so the `#/$defs/...`
references pydantic writes would point at nothing there (no client generator or
validator could resolve them). They are inlined instead.

`x-capability` on an operation says who it opens to, for tools (the fuzz tests among
them) that must not parse prose: a list of which any one opens it, each a role's
capability (`tasks.read`) or one of `PLATFORM_ADMIN`, `AGENT_TOKEN`, `AGENT_SIGNATURE`
(no user's role holds those). The access dependencies carry it (`mark`); `declare_capabilities`
copies it from each route's dependencies onto the route, unless the route's declaration
states it itself (`openapi_extra={"x-capability": [...]}`, for a check made in the
handler). An operation without it opens to any authenticated user, or to anyone.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute, APIRouter
from pydantic import BaseModel

_DEFS = "#/$defs/"
EXTENSION = "x-capability"
PLATFORM_ADMIN = "platform:admin"
AGENT_TOKEN = "agent:token"
AGENT_SIGNATURE = "agent:signature"
_ATTRIBUTE = "x_capability"
F = TypeVar("F", bound=Callable[..., Any])


def mark(call: F, capabilities: Iterable[str]) -> F:
    """`call`, a dependency, recorded as opening its route to any of `capabilities`."""
    setattr(call, _ATTRIBUTE, list(capabilities))
    return call


def _declared(dependant: Dependant) -> list[str]:
    found: list[str] = list(getattr(dependant.call, _ATTRIBUTE, None) or [])
    for sub in dependant.dependencies:
        found += [c for c in _declared(sub) if c not in found]
    return found


def declare_capabilities(router: APIRouter) -> None:
    """Put `x-capability` on every route of `router` (and of the routers it includes)
    whose dependencies mark who it opens to; before the first request, which freezes
    the routes."""
    for route in router.routes:
        included = getattr(route, "original_router", None)  # an included router
        if isinstance(included, APIRouter):
            declare_capabilities(included)
        if not isinstance(route, APIRoute):
            continue
        extra = route.openapi_extra or {}
        if EXTENSION in extra:
            continue
        capabilities = _declared(route.dependant)
        if capabilities:
            route.openapi_extra = {**extra, EXTENSION: capabilities}


def body_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The model's JSON schema with every `#/$defs/` reference replaced by its target."""
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})

    def inline(node: Any) -> Any:
        if isinstance(node, list):
            return [inline(item) for item in node]
        if not isinstance(node, dict):
            return node
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(_DEFS):
            rest = {key: value for key, value in node.items() if key != "$ref"}
            return inline({**defs[ref.removeprefix(_DEFS)], **rest})
        return {key: inline(value) for key, value in node.items()}

    result: dict[str, Any] = inline(schema)
    return result
