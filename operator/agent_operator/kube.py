"""The operator's one door to the Kubernetes API (besides kopf's own watching).

A thin async layer over one aiohttp session (kopf's own HTTP stack; no client library, see
:mod:`agent_operator.credentials`): server-side apply of a manifest with the operator's
field manager, get, delete, merge-patch of a status subresource, and Events. It knows the
paths of the few kinds the operator touches and nothing of AgentInstances' meaning;
everything it returns is plain JSON.
"""

from __future__ import annotations

import json
from typing import Any

import aiohttp

from agent_operator import credentials
from agent_operator.metrics import API_REQUESTS
from humanwork_core.kube_body import APPLY_CONTENT_TYPE, encode_body
from humanwork_core.kube_errors import KubeError, error_from_status
from humanwork_core.kube_pool import reuse_most_recent_first
from humanwork_core.resources import names

__all__ = ["Kube", "KubeError", "path_for"]

FIELD_MANAGER = names.OPERATOR_FIELD_MANAGER
USER_AGENT = "humanwork-operator/0.1.0"
CONNECTIONS = 32
"""Connections the operator keeps to the API server at most (concurrent reconciles share
them; each TLS connection holds about 128 KiB of buffers, so a pool of 100 cost 12 MiB)."""
TIMEOUT = aiohttp.ClientTimeout()
"""No timeout, as with the client library before: under a burst, requests wait for a free
connection of the pool, and a reconcile must not fail for having waited."""

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


class Kube:
    """Async access to the API server with one connection pool."""

    def __init__(self, session: aiohttp.ClientSession, creds: credentials.Credentials) -> None:
        self._session = session
        self._creds = creds
        self._server = creds.server.rstrip("/")

    @classmethod
    async def connect(cls, kubeconfig: str | None = None) -> Kube:
        """In-cluster credentials when running in a pod, else the kubeconfig."""
        creds = credentials.load(kubeconfig)
        connector = aiohttp.TCPConnector(ssl=creds.ssl_context, limit=CONNECTIONS)
        reuse_most_recent_first(connector)  # the surplus of a burst is closed once idle
        session = aiohttp.ClientSession(
            connector=connector,
            timeout=TIMEOUT,
            # what the API server's audit log attributes to us
            headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
        )
        return cls(session, creds)

    async def close(self) -> None:
        await self._session.close()

    async def _call(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        content_type: str = "application/json",
        query: list[tuple[str, str]] | None = None,
    ) -> dict[str, Any]:
        API_REQUESTS.labels(method=method, resource=resource_of(path)).inc()
        headers = {"Content-Type": content_type}
        authorization = self._creds.authorization()
        if authorization:
            headers["Authorization"] = authorization
        data = body if isinstance(body, bytes) or body is None else encode_body(body)
        async with self._session.request(
            method, self._server + path, params=query or [], data=data, headers=headers
        ) as response:
            raw = await response.read()
            status = response.status
        doc = _document(raw)
        if status >= 400:
            raise error_from_status(status, doc)
        return doc

    async def get(
        self, api_version: str, kind: str, namespace: str | None, name: str
    ) -> dict[str, Any] | None:
        """The object, or None when it does not exist."""
        try:
            return await self._call("GET", path_for(api_version, kind, namespace, name))
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    async def list(
        self, api_version: str, kind: str, namespace: str | None, label_selector: str
    ) -> list[dict[str, Any]]:
        """The objects of a collection that match `label_selector` (one page)."""
        path = path_for(api_version, kind, namespace)
        doc = await self._call("GET", path, query=[("labelSelector", label_selector)])
        return list(doc.get("items") or [])

    async def apply(
        self, manifest: dict[str, Any], *, subresource: str | None = None
    ) -> dict[str, Any]:
        """Server-side apply `manifest` as the operator's field manager (conflicts forced:
        the operator owns what it declares, so hand edits of those fields are undone)."""
        meta = manifest["metadata"]
        path = path_for(
            manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"]
        )
        if subresource:
            path += f"/{subresource}"
        return await self._call(
            "PATCH",
            path,
            body=encode_body(manifest),
            content_type=APPLY_CONTENT_TYPE,
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
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
    ) -> dict[str, Any]:
        path = path_for(api_version, kind, namespace, name)
        if subresource:
            path += f"/{subresource}"
        return await self._call(
            "PATCH",
            path,
            body=patch,
            content_type="application/merge-patch+json",
            query=[("fieldManager", FIELD_MANAGER)],
        )

    async def delete(self, api_version: str, kind: str, namespace: str | None, name: str) -> None:
        """Delete the object; already gone is fine."""
        try:
            await self._call("DELETE", path_for(api_version, kind, namespace, name))
        except KubeError as exc:
            if exc.status != 404:
                raise

    async def replace(self, manifest: dict[str, Any]) -> dict[str, Any]:
        """PUT the whole object; with `metadata.resourceVersion` set, a 409 when it changed
        since (an optimistic lock, as leader election needs)."""
        meta = manifest["metadata"]
        path = path_for(
            manifest["apiVersion"], manifest["kind"], meta.get("namespace"), meta["name"]
        )
        return await self._call("PUT", path, body=manifest, query=[("fieldManager", FIELD_MANAGER)])

    async def create(self, manifest: dict[str, Any]) -> dict[str, Any]:
        meta = manifest["metadata"]
        path = path_for(manifest["apiVersion"], manifest["kind"], meta.get("namespace"))
        # generateName objects have no name yet: POST to the collection either way
        return await self._call(
            "POST", path, body=manifest, query=[("fieldManager", FIELD_MANAGER)]
        )


def _document(raw: bytes) -> dict[str, Any]:
    """A response body as JSON; a body that is not a JSON object (a proxy's plain-text
    error) becomes its message."""
    if not raw:
        return {}
    try:
        doc: Any = json.loads(raw)
    except ValueError:
        return {"message": raw.decode(errors="replace")[:500]}
    return dict(doc) if isinstance(doc, dict) else {"message": str(doc)[:500]}
