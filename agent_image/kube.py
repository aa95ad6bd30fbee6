"""`KubeClient`: the agent's only door to the Kubernetes API (its AgenticTasks), over httpx.

In-cluster configuration, from what the pod gives it: the API server at
`https://{KUBERNETES_SERVICE_HOST}:{KUBERNETES_SERVICE_PORT}`, the cluster CA from
`{kube_api_dir}/ca.crt`, and the projected ServiceAccount token `{kube_api_dir}/token`,
re-read on every request because the kubelet rotates it. The agent's identity is its
ServiceAccount `<AgentInstance name>-agent`; its Role lets it get, list, watch and create
AgenticTasks and get and patch their status in its own namespace, nothing else (and the
admission policies let it write only each step's `execution`).

Errors are :class:`KubeError` subclasses carrying the HTTP status and the API's `Status`
message: :class:`KubeNotFound` (404), :class:`KubeConflict` (409),
:class:`KubeGone` (410, a watch's resourceVersion is too old: list again),
:class:`KubeForbidden` (403, RBAC or an admission policy), :class:`KubeInvalid` (422),
:class:`KubeUnreachable` (no connection).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from agent_image.settings import AgentSettings
from humanwork_core.kube_body import APPLY_CONTENT_TYPE, encode_body
from humanwork_core.kube_errors import (
    KubeConflict,
    KubeError,
    KubeForbidden,
    KubeGone,
    KubeInvalid,
    KubeNotFound,
    KubeUnreachable,
    error_from_status,
)
from humanwork_core.resources import common as resources
from humanwork_core.resources import names

__all__ = [
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeForbidden",
    "KubeGone",
    "KubeInvalid",
    "KubeNotFound",
    "KubeUnreachable",
    "error_from_status",
]

GROUP, VERSION = resources.GROUP, resources.VERSION
PLURAL = names.TASKS
KIND = "AgenticTask"
API_VERSION = resources.API_VERSION
FIELD_MANAGER = names.AGENT_FIELD_MANAGER
"""The agent's default field manager for creates and server-side applies."""


def _response_error(response: httpx.Response) -> KubeError:
    try:
        body = response.json()
    except ValueError:
        body = {"message": response.text[:500], "reason": response.reason_phrase}
    return error_from_status(response.status_code, body)


class KubeClient:
    """The agent's calls to the Kubernetes API, in its own namespace, as itself."""

    def __init__(
        self,
        base_url: str,
        namespace: str,
        token_file: Path,
        ca_file: Path | None,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.namespace = namespace
        self.token_file = token_file
        self.ca_file = ca_file
        self.timeout = timeout
        self._transport = transport
        self._client: httpx.AsyncClient | None = None

    @classmethod
    def from_settings(cls, settings: AgentSettings, **kwargs: Any) -> KubeClient:
        """The in-cluster client of the pod; nothing is read until the first request."""
        host = settings.kube_host or "kubernetes.default.svc"
        if ":" in host and not host.startswith("["):
            host = f"[{host}]"  # an IPv6 address
        return cls(
            f"https://{host}:{settings.kube_port}",
            settings.namespace,
            settings.kube_api_dir / "token",
            settings.kube_api_dir / "ca.crt",
            **kwargs,
        )

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            verify: ssl.SSLContext | bool = True
            if self.ca_file is not None and self._transport is None:
                try:
                    verify = ssl.create_default_context(cafile=str(self.ca_file))
                except (OSError, ssl.SSLError) as exc:
                    raise KubeUnreachable(
                        503, "NoClusterCA", f"cannot load {self.ca_file}: {exc}"
                    ) from None
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                verify=verify,
                timeout=self.timeout,
                transport=self._transport,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def _headers(self, content_type: str | None = None) -> dict[str, str]:
        try:
            token = self.token_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise KubeUnreachable(503, "NoToken", f"cannot read {self.token_file}: {exc}") from None
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _path(self, name: str | None = None, subresource: str | None = None) -> str:
        path = f"/apis/{GROUP}/{VERSION}/namespaces/{quote(self.namespace, safe='')}/{PLURAL}"
        if name is not None:
            path += f"/{quote(name, safe='')}"
        if subresource is not None:
            path += f"/{subresource}"
        return path

    async def _request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        body: Any = None,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        content = encode_body(body) if body is not None else None
        try:
            response = await self._http().request(
                method,
                path,
                params=params,
                content=content,
                headers=self._headers(
                    content_type or ("application/json" if content is not None else None)
                ),
            )
        except httpx.TransportError as exc:
            raise KubeUnreachable(503, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            raise _response_error(response)
        data: dict[str, Any] = response.json()
        return data

    # --- AgenticTasks ------------------------------------------------------------------------

    async def create_task(
        self, body: dict[str, Any], *, field_manager: str = FIELD_MANAGER
    ) -> dict[str, Any]:
        """Create an AgenticTask in the agent's namespace (apiVersion, kind and namespace
        are filled in when missing); the created object."""
        obj = dict(body)
        obj.setdefault("apiVersion", API_VERSION)
        obj.setdefault("kind", KIND)
        obj["metadata"] = {**dict(obj.get("metadata") or {}), "namespace": self.namespace}
        return await self._request(
            "POST", self._path(), params={"fieldManager": field_manager}, body=obj
        )

    async def get_task(self, name: str) -> dict[str, Any] | None:
        """The AgenticTask `name`, or None when there is none."""
        try:
            return await self._request("GET", self._path(name))
        except KubeNotFound:
            return None

    async def list_tasks(
        self, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        """Every AgenticTask of the namespace (in pages of 500), and the list's
        resourceVersion to watch from."""
        items: list[dict[str, Any]] = []
        token = ""
        while True:
            params = {"limit": "500"}
            if label_selector:
                params["labelSelector"] = label_selector
            if token:
                params["continue"] = token
            page = await self._request("GET", self._path(), params=params)
            items.extend(page.get("items") or [])
            meta = page.get("metadata") or {}
            token = str(meta.get("continue") or "")
            if not token:
                return items, str(meta.get("resourceVersion") or "")

    async def watch_tasks(
        self,
        resource_version: str,
        *,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(type, object) of every change after `resource_version`: ADDED, MODIFIED,
        DELETED and BOOKMARK (an object carrying only the new resourceVersion), until the
        server ends the watch (after about `timeout_seconds`; watch again from the last
        resourceVersion seen). Raises :class:`KubeGone` when the version is too old
        (the caller lists again), :class:`KubeUnreachable` when the connection breaks."""
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": str(timeout_seconds),
        }
        if label_selector:
            params["labelSelector"] = label_selector
        timeout = httpx.Timeout(self.timeout, read=timeout_seconds + 30.0)
        try:
            request = self._http().build_request(
                "GET", self._path(), params=params, headers=self._headers(), timeout=timeout
            )
            response = await self._http().send(request, stream=True)
        except httpx.TransportError as exc:
            raise KubeUnreachable(503, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        try:
            if response.status_code >= 400:
                await response.aread()
                raise _response_error(response)
            async for line in response.aiter_lines():
                if not line.strip():
                    continue
                event = json.loads(line)
                kind = str(event.get("type") or "")
                obj = event.get("object") or {}
                if kind == "ERROR":
                    raise error_from_status(int(obj.get("code") or 500), obj)
                yield kind, obj
        except httpx.TransportError as exc:
            raise KubeUnreachable(503, "Unreachable", f"{type(exc).__name__}: {exc}") from None
        finally:
            await response.aclose()

    async def apply_task_status(
        self,
        name: str,
        patch: dict[str, Any],
        field_manager: str = FIELD_MANAGER,
        force: bool = True,
    ) -> dict[str, Any]:
        """Server-side apply on the status subresource of AgenticTask `name`, as
        `field_manager`; the updated object.

        `patch` is the apply configuration, normally `{"status": {...}}` (for example
        `{"status": taskflow.owned_status(status, Writer.AGENT)}`), optionally with
        `metadata.resourceVersion` as a precondition (:class:`KubeConflict` when stale).
        A dict without `status` (nor apiVersion) is taken as the status itself. apiVersion,
        kind, metadata.name and metadata.namespace are filled in."""
        body = dict(patch)
        if "status" not in body and "apiVersion" not in body:
            body = {"status": body}
        body.setdefault("apiVersion", API_VERSION)
        body.setdefault("kind", KIND)
        body["metadata"] = {
            **dict(body.get("metadata") or {}),
            "name": name,
            "namespace": self.namespace,
        }
        params = {"fieldManager": field_manager}
        if force:
            params["force"] = "true"
        return await self._request(
            "PATCH",
            self._path(name, "status"),
            params=params,
            body=body,
            content_type=APPLY_CONTENT_TYPE,
        )
