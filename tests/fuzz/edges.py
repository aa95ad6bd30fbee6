"""The edge values every parameter of an OpenAPI document must survive, sent one parameter
at a time: a huge integer, an empty string, NUL and non-ASCII text, into every path,
query and header parameter and every top-level property of every JSON body, the other
fields holding valid values (the document's own examples and ids that exist). A
fuzzer reaches them only by chance; here each one is sent for sure.

`send_edges` answers the requests that met a server error (5xx), each as a line that
says which parameter and value; none is the expected outcome."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import httpx

HUGE = 332979816161984446464
"""Larger than any 64-bit integer (the issue's /audit offset)."""

EDGES: tuple[tuple[str, Any], ...] = (
    ("huge integer", HUGE),
    ("huge integer text", str(HUGE)),
    ("empty string", ""),
    ("NUL", "a\x00b"),
    ("non-ASCII", "ünïcødé 漢字 🙂 \u202e"),
)
HEADER_EDGES = tuple((name, v) for name, v in EDGES if name != "NUL")
"""NUL cannot travel in an HTTP/1.1 header (the client refuses to send it)."""

METHODS = ("get", "post", "put", "patch", "delete")

Sign = Callable[[bytes], dict[str, str]]
"""Headers that authenticate a raw body (the agent's HMAC signature)."""


@dataclass
class Request:
    method: str
    path: str
    path_params: dict[str, Any]
    query: dict[str, Any]
    headers: dict[str, Any]
    body: Any
    what: str

    def url(self) -> str:
        path = self.path
        for name, value in self.path_params.items():
            path = path.replace("{" + name + "}", quote(str(value), safe=""))
        return path


def _resolve(document: Mapping[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        target: Any = document
        for part in node["$ref"][2:].split("/"):
            target = target[part]
        node = target
    return node


def _body_schema(document: Mapping[str, Any], operation: Mapping[str, Any]) -> Any:
    content = (operation.get("requestBody") or {}).get("content") or {}
    media = content.get("application/json")
    return None if media is None else _resolve(document, media.get("schema") or {})


def _example(document: Mapping[str, Any], schema: Any) -> Any:
    """A valid body: the schema's first example, else an empty object."""
    schema = _resolve(document, schema)
    if isinstance(schema, dict) and schema.get("examples"):
        return copy.deepcopy(schema["examples"][0])
    return {}


def _base_value(name: str, schema: Any, ids: Mapping[str, str]) -> Any:
    if name in ids:
        return ids[name]
    examples = (schema or {}).get("examples") if isinstance(schema, dict) else None
    return examples[0] if examples else "x"


def requests_of(
    document: Mapping[str, Any],
    ids: Mapping[str, str],
    bodies: Mapping[str, Any] | None = None,
) -> Iterator[Request]:
    """One request per (operation, parameter, edge value); `bodies` are valid bodies by
    path where the document has no example."""
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item and not is_stream(item[method]):
                body = (bodies or {}).get(path)
                yield from _operation_requests(document, path, method, item[method], ids, body)


def valid_requests(document: Mapping[str, Any], ids: Mapping[str, str]) -> Iterator[Request]:
    """One request per operation (streams aside) with the values its edge requests start
    from: ids that exist, the document's examples."""
    for path, item in document["paths"].items():
        for method in METHODS:
            if method in item and not is_stream(item[method]):
                base, body = _base(document, item[method], ids, None)
                yield Request(
                    method,
                    path,
                    base["path"],
                    base["query"],
                    base["header"],
                    body,
                    f"{method.upper()} {path}",
                )


def is_stream(operation: Mapping[str, Any]) -> bool:
    """Whether the operation answers an endless stream (server-sent events): a request
    never completes, so its edges are tested by its own tests
    (tests/platform_k8s/test_notify.py)."""
    answer = (operation.get("responses") or {}).get("200") or {}
    return "text/event-stream" in (answer.get("content") or {})


def _base(
    document: Mapping[str, Any], operation: Mapping[str, Any], ids: Mapping[str, str], valid: Any
) -> tuple[dict[str, dict[str, Any]], Any]:
    """The valid values of an operation's required parameters by location, and its body."""
    base = {
        loc: {
            p["name"]: _base_value(p["name"], p.get("schema"), ids)
            for p in operation.get("parameters") or []
            if p["in"] == loc and (p.get("required") or loc == "path")
        }
        for loc in ("path", "query", "header")
    }
    schema = _body_schema(document, operation)
    body = None if schema is None else valid if valid is not None else _example(document, schema)
    return base, body


def _operation_requests(
    document: Mapping[str, Any],
    path: str,
    method: str,
    operation: Mapping[str, Any],
    ids: Mapping[str, str],
    valid: Any = None,
) -> Iterator[Request]:
    params = operation.get("parameters") or []
    base, body = _base(document, operation, ids, valid)
    schema = _body_schema(document, operation)
    label = f"{method.upper()} {path}"
    for p in params:
        loc = p["in"]
        for name, value in HEADER_EDGES if loc == "header" else EDGES:
            parts = {where: dict(values) for where, values in base.items()}
            parts[loc][p["name"]] = value
            yield Request(
                method,
                path,
                parts["path"],
                parts["query"],
                parts["header"],
                copy.deepcopy(body),
                f"{label} {loc} {p['name']}={name}",
            )
    if isinstance(body, dict):
        for prop in (schema or {}).get("properties") or {}:
            for name, value in EDGES:
                yield Request(
                    method,
                    path,
                    dict(base["path"]),
                    dict(base["query"]),
                    dict(base["header"]),
                    {**copy.deepcopy(body), prop: value},
                    f"{label} body {prop}={name}",
                )


def send_edges(
    client: httpx.Client,
    document: Mapping[str, Any],
    ids: Mapping[str, str],
    sign: Sign | None = None,
    bodies: Mapping[str, Any] | None = None,
) -> tuple[Counter[int], list[str]]:
    """(how many answers had each status, the server errors met)."""
    statuses: Counter[int] = Counter()
    errors = []
    for req in requests_of(document, ids, bodies):
        headers = {
            k: (v.encode() if isinstance(v, str) else str(v)) for k, v in req.headers.items()
        }
        content = None if req.body is None else json.dumps(req.body).encode()
        if content is not None:
            headers["Content-Type"] = "application/json"
        if sign is not None:
            headers.update(sign(content or b""))
        answer = client.request(
            req.method.upper(),
            req.url(),
            params={k: str(v) for k, v in req.query.items()},
            headers=headers,
            content=content,
        )
        statuses[answer.status_code] += 1
        if answer.status_code >= 500:
            errors.append(f"{req.what}: {answer.status_code} {answer.text[:300]}")
    return statuses, errors
