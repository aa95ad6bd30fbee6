"""The lean Kubernetes client of the operator and the platform API (and its backup tool).

A thin async layer over one aiohttp session (no client library, see
:mod:`humanwork_core.kube_credentials`): get, list (a page, or every page), create,
replace, delete, server-side apply (with the caller's field manager, conflicts forced),
merge patches, and a watch (a streaming GET of JSON lines). It knows the paths of the few
kinds the components touch and nothing of their meaning; everything it returns is plain
JSON, every refusal a :class:`~humanwork_core.kube_errors.KubeError`.

Answers and watch events are decoded by pydantic-core's JSON parser
(:func:`decode_json`): the same objects as `json.loads` in about a third of its time (an
agent's Deployment event, some 10 KB with its pod template and managed fields: 30 against
85 microseconds here). A write whose answer nobody reads is not decoded at all
(`answer=False`).

The connection pool reuses its idle connections most recently released first
(:mod:`humanwork_core.kube_pool`). The session does not read the environment
(`trust_env` off: no proxy variables, no ~/.netrc read per request).

Imports aiohttp: the agent's image (which has none) does not import this module.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any, Self

import aiohttp
import pydantic_core

from humanwork_core.kube_body import APPLY_CONTENT_TYPE, encode_body
from humanwork_core.kube_credentials import Credentials
from humanwork_core.kube_errors import KubeError, error_from_status
from humanwork_core.kube_pool import reuse_most_recent_first
from humanwork_core.resources import names

__all__ = ["Kube", "KubeError", "cluster_path", "decode_json", "path_for", "resource_of"]

Items = list[dict[str, Any]]

NO_TIMEOUT = aiohttp.ClientTimeout()
"""Under a burst, requests wait for a free connection of the pool, and a call must not
fail for having waited (as with the client libraries before)."""
WATCH_READ_SLACK = 30.0
"""A watch's read timeout beyond the `timeoutSeconds` asked of the server: a stream
silent that long is dead (a bookmark comes about every minute)."""

# kind -> (plural, namespaced)
_KINDS: dict[str, tuple[str, bool]] = {
    "Namespace": ("namespaces", False),
    "ServiceAccount": ("serviceaccounts", True),
    "Secret": ("secrets", True),
    "ConfigMap": ("configmaps", True),
    "Service": ("services", True),
    "Event": ("events", True),
    "Role": ("roles", True),
    "RoleBinding": ("rolebindings", True),
    "NetworkPolicy": ("networkpolicies", True),
    "EndpointSlice": ("endpointslices", True),
    "Deployment": ("deployments", True),
    "AgentInstance": (names.INSTANCES, True),
    "AgenticTask": (names.TASKS, True),
    "Lease": ("leases", True),
}


def decode_json(raw: bytes | str) -> Any:
    """A JSON document as Python objects, as `json.loads` gives them; ValueError when it
    is not JSON. Its string cache is off: faster still for documents of mostly distinct
    strings, and no process-wide cache to keep."""
    return pydantic_core.from_json(raw, cache_strings=False)


def path_for(api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
    """The REST path of a collection or an object."""
    plural, namespaced = _KINDS[kind]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced:
        if not namespace:
            raise ValueError(f"{kind} is namespaced: a namespace is required")
        base += f"/namespaces/{namespace}"
    base += f"/{plural}"
    return f"{base}/{name}" if name else base


def cluster_path(api_version: str, kind: str) -> str:
    """The REST path of a kind's collection across every namespace."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    return f"{base}/{_KINDS[kind][0]}"


def resource_of(path: str) -> str:
    """The resource a REST path names, with its subresource: `secrets`,
    `agentinstances/status`, `namespaces` (the metrics' label)."""
    parts = path.strip("/").split("/")
    rest = parts[2:] if parts[0] == "api" else parts[3:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]  # a namespaced object or collection
    if not rest:
        return "?"
    return f"{rest[0]}/{rest[2]}" if len(rest) > 2 else rest[0]


def _object_path(manifest: dict[str, Any], subresource: str | None = None) -> str:
    meta = manifest["metadata"]
    path = path_for(manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"])
    return f"{path}/{subresource}" if subresource else path


class Kube:
    """Async access to the API server with one connection pool, writing as `field_manager`;
    `on_request(method, path)` is told of every request (a metric)."""

    def __init__(
        self,
        session: aiohttp.ClientSession,
        creds: Credentials,
        field_manager: str,
        on_request: Callable[[str, str], None] | None = None,
    ) -> None:
        self._session = session
        self._creds = creds
        self._server = creds.server.rstrip("/")
        self.field_manager = field_manager
        self._on_request = on_request

    @classmethod
    def open(
        cls,
        creds: Credentials,
        *,
        field_manager: str,
        user_agent: str,
        connections: int,
        on_request: Callable[[str, str], None] | None = None,
    ) -> Self:
        """A client with a pool of at most `connections` (inside a running event loop)."""
        connector = aiohttp.TCPConnector(ssl=creds.ssl_context, limit=connections)
        reuse_most_recent_first(connector)  # the surplus of a burst is closed once idle
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=NO_TIMEOUT,
            # what the API server's audit log attributes to us
            headers={"User-Agent": user_agent, "Accept": "application/json"},
        )
        return cls(session, creds, field_manager, on_request)

    @property
    def connector(self) -> aiohttp.BaseConnector | None:
        return self._session.connector

    async def close(self) -> None:
        await self._session.close()

    def _headers(self, content_type: str) -> dict[str, str]:
        headers = {"Content-Type": content_type}
        authorization = self._creds.authorization()
        if authorization:
            headers["Authorization"] = authorization
        return headers

    async def call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
        answer: bool = True,
    ) -> dict[str, Any]:
        """One request; the answer's JSON, or the typed error of a refusal. With `answer`
        False (a write whose answer nobody reads) a success's body is read but not
        decoded (an object with its managed fields is most of a write's cost here) and
        the result is `{}`; a refusal's body is decoded into its error all the same."""
        if self._on_request is not None:
            self._on_request(method, path)
        data = body if isinstance(body, bytes) or body is None else encode_body(body)
        async with self._session.request(
            method,
            self._server + path,
            params=query or [],
            data=data,
            headers=self._headers(content_type),
        ) as response:
            raw = await response.read()
            status = response.status
        if status >= 400:
            raise error_from_status(status, _document(raw))
        return _document(raw) if answer else {}

    async def stream(
        self, path: str, query: list[tuple[str, str]], read_timeout: float
    ) -> AsyncIterator[dict[str, Any]]:
        """The JSON documents of a streaming GET, one a line (a watch), until the server
        ends the stream; a refusal (or a watch's ERROR event) is its typed error."""
        if self._on_request is not None:
            self._on_request("WATCH", path)
        timeout = aiohttp.ClientTimeout(sock_read=read_timeout)
        async with self._session.get(
            self._server + path,
            params=query,
            headers=self._headers("application/json"),
            timeout=timeout,
        ) as response:
            if response.status >= 400:
                raise error_from_status(response.status, _document(await response.read()))
            async for line in _lines(response.content):
                event = decode_json(line)
                if event.get("type") == "ERROR":
                    obj = event.get("object") or {}
                    raise error_from_status(int(obj.get("code") or 500), obj)
                yield event

    async def stream_lines(
        self, path: str, query: list[tuple[str, str]], read_timeout: float
    ) -> AsyncIterator[bytes]:
        """The raw lines of a streaming GET (a watch), unparsed, until the server ends the
        stream: for a caller that parses each line into its own typed model in one go. A
        refusal is its typed error; a watch's ERROR event is a line like any other here
        (the caller raises it: `error_from_status` of its object)."""
        if self._on_request is not None:
            self._on_request("WATCH", path)
        timeout = aiohttp.ClientTimeout(sock_read=read_timeout)
        async with self._session.get(
            self._server + path,
            params=query,
            headers=self._headers("application/json"),
            timeout=timeout,
        ) as response:
            if response.status >= 400:
                raise error_from_status(response.status, _document(await response.read()))
            async for line in _lines(response.content):
                yield line

    async def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self.call("GET", path_for(api_version, kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        """The objects of a collection that match `label_selector` (one page)."""
        path = path_for(api_version, kind, namespace)
        doc = await self.call("GET", path, query=[("labelSelector", label_selector)])
        return list(doc.get("items") or [])

    async def list_pages(
        self, path: str, limit: int = 500, *, label_selector: str = ""
    ) -> AsyncIterator[tuple[Items, str]]:
        """Every object of the collection at `path` (that matches `label_selector`, when
        given), `limit` at a time, each page with the list's resourceVersion (one
        snapshot: the version to watch from)."""
        token = ""
        selected = [("labelSelector", label_selector)] if label_selector else []
        while True:
            query = [("limit", str(limit)), *selected] + ([("continue", token)] if token else [])
            page = await self.call("GET", path, query=query)
            meta = page.get("metadata") or {}
            yield list(page.get("items") or []), str(meta.get("resourceVersion") or "")
            token = str(meta.get("continue") or "")
            if not token:
                return

    async def apply(
        self, manifest: dict[str, Any], *, subresource: str | None = None, answer: bool = True
    ) -> dict[str, Any]:
        """Server-side apply `manifest` as the field manager, conflicts forced (the
        component owns what it declares, so hand edits of those fields are undone); a
        `metadata.resourceVersion` in it is a precondition (409 when it changed). The
        object as applied, or `{}` with `answer` False (see :meth:`call`)."""
        return await self.call(
            "PATCH",
            _object_path(manifest, subresource),
            body=encode_body(manifest),
            content_type=APPLY_CONTENT_TYPE,
            query=[("fieldManager", self.field_manager), ("force", "true")],
            answer=answer,
        )

    async def merge_patch(
        self,
        api_version: str,
        kind: str,
        namespace: str | None,
        name: str,
        patch: dict[str, Any],
        *,
        subresource: str | None = None,
        answer: bool = True,
    ) -> dict[str, Any]:
        """The object as patched, or `{}` with `answer` False (see :meth:`call`)."""
        path = path_for(api_version, kind, namespace, name)
        if subresource:
            path += f"/{subresource}"
        return await self.call(
            "PATCH",
            path,
            body=patch,
            content_type="application/merge-patch+json",
            query=[("fieldManager", self.field_manager)],
            answer=answer,
        )

    async def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete the object; already gone is fine."""
        try:
            await self.call("DELETE", path_for(api_version, kind, namespace, name))
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def replace(
        self, manifest: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        """PUT the whole object; with `metadata.resourceVersion` set, a 409 when it changed
        since (an optimistic lock, as leader election needs)."""
        return await self.call(
            "PUT",
            _object_path(manifest, subresource),
            body=manifest,
            query=[("fieldManager", self.field_manager)],
        )

    async def create(self, manifest: dict[str, Any], *, answer: bool = True) -> dict[str, Any]:
        """The object as created, or `{}` with `answer` False (see :meth:`call`)."""
        meta = manifest["metadata"]
        path = path_for(manifest["apiVersion"], manifest["kind"], meta.get("namespace"))
        # generateName objects have no name yet: POST to the collection either way
        return await self.call(
            "POST",
            path,
            body=manifest,
            query=[("fieldManager", self.field_manager)],
            answer=answer,
        )


async def _lines(content: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """The non-empty lines of a stream, of any length (aiohttp's own line reader refuses
    a line over 128 KiB, and a task's JSON may be longer)."""
    pending = b""
    async for chunk in content.iter_any():
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _document(raw: bytes) -> dict[str, Any]:
    """A response body as JSON; a body that is not a JSON object (a proxy's plain-text
    error) becomes its message."""
    if not raw:
        return {}
    try:
        doc: Any = decode_json(raw)
    except ValueError:
        return {"message": raw.decode(errors="replace")[:500]}
    return dict(doc) if isinstance(doc, dict) else {"message": str(doc)[:500]}
