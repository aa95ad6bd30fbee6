"""`KubeClient`: the only module of the platform API that talks to the Kubernetes API.

Async throughout, over the lean client the operator uses too
(:mod:`humanwork_core.kube_client`: one aiohttp session, plain JSON, no generated models),
so a request never blocks the event loop. It knows exactly what the platform does with
Kubernetes: read, list and watch AgenticTasks, create them, write the platform's part of
a task's status by server-side apply (field manager `humanwork-platform-api`) with a
resourceVersion precondition, and create (or read) org namespaces. API errors are the
`KubeError` family of humanwork_core; a connection that fails is `KubeUnreachable` (503).

Configured by `Settings`: `HUMANWORK_KUBECONFIG` (a kubeconfig file) or
`HUMANWORK_KUBE_IN_CLUSTER=true` (the pod's ServiceAccount); `from_settings` answers
None when neither is set.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from humanwork_core import kube_credentials
from humanwork_core.kube_client import Kube, cluster_path, path_for
from humanwork_core.kube_errors import (
    KubeConflict,
    KubeError,
    KubeInvalid,
    KubeNotFound,
    KubeUnreachable,
)
from humanwork_core.resources import common as resources
from humanwork_core.resources import names
from platform_api.kube.task_watch import TaskEvent, decode
from platform_api.settings import Settings

__all__ = [
    "KubeClient",
    "KubeConflict",
    "KubeError",
    "KubeInvalid",
    "KubeNotFound",
    "KubeUnreachable",
]

GROUP, VERSION = resources.GROUP, resources.VERSION
API_VERSION = f"{GROUP}/{VERSION}"
TASKS = names.TASKS
TASK_KIND = "AgenticTask"
INSTANCE_KIND = "AgentInstance"
AGENT_INSTANCES = names.INSTANCES
FIELD_MANAGER = names.PLATFORM_FIELD_MANAGER
USER_AGENT = "humanwork-platform-api/0.1.0"
T = TypeVar("T")
_TRANSPORT = (aiohttp.ClientError, OSError, TimeoutError)
WATCH_READ_SLACK = 30.0
"""A watch silent this long past its `timeoutSeconds` is dead (bookmarks come about every
minute): the read fails, `KubeUnreachable`, and the caller lists again."""


def _unreachable(exc: BaseException) -> KubeUnreachable:
    return KubeUnreachable(503, "Unreachable", type(exc).__name__)


async def _call(call: Awaitable[T]) -> T:
    try:
        return await call
    except _TRANSPORT as exc:
        raise _unreachable(exc) from None


def credentials_of(settings: Settings) -> kube_credentials.Credentials | None:
    """The configured identity: the kubeconfig, else the pod's ServiceAccount, else None."""
    if settings.kubeconfig:
        return kube_credentials.from_kubeconfig(Path(settings.kubeconfig))
    if settings.kube_in_cluster:
        return kube_credentials.in_cluster()
    return None


class KubeClient:
    """The platform's calls to the Kubernetes API, under the platform's identity."""

    def __init__(self, kube: Kube) -> None:
        self._kube = kube

    @classmethod
    async def from_settings(cls, settings: Settings) -> KubeClient | None:
        """A client for the configured cluster, or None when Kubernetes is not configured."""
        creds = credentials_of(settings)
        if creds is None:
            return None
        kube = Kube.open(
            creds,
            field_manager=FIELD_MANAGER,
            user_agent=USER_AGENT,  # names the platform in the API server's audit log
            connections=settings.kube_connections,
        )
        return cls(kube)

    async def close(self) -> None:
        await self._kube.close()

    def _path(self, kind: str, namespace: str, name: str | None = None) -> str:
        return path_for(API_VERSION, kind, namespace, name)

    # --- AgenticTasks ---------------------------------------------------------------------

    async def get_task(self, namespace: str, name: str) -> dict[str, Any]:
        return await _call(self._kube.call("GET", self._path(TASK_KIND, namespace, name)))

    async def list_tasks(self, namespace: str) -> list[dict[str, Any]]:
        """Every AgenticTask of `namespace` (read in pages of 500)."""
        items: list[dict[str, Any]] = []
        try:
            async for page, _ in self._kube.list_pages(self._path(TASK_KIND, namespace)):
                items.extend(page)
        except _TRANSPORT as exc:
            raise _unreachable(exc) from None
        return items

    async def list_task_pages(
        self, limit: int = 500
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        """Every AgenticTask of the cluster, `limit` at a time, each page with the list's
        resourceVersion (one snapshot: the version to watch from once the last page is
        in): one unpaged list of 100,000 tasks is ~200 MB of JSON parsed at once."""
        try:
            async for page in self._kube.list_pages(cluster_path(API_VERSION, TASK_KIND), limit):
                yield page
        except _TRANSPORT as exc:
            raise _unreachable(exc) from None

    async def list_all_tasks(self) -> tuple[list[dict[str, Any]], str]:
        """Every AgenticTask of the cluster and the resourceVersion to watch from."""
        listed = await _call(self._kube.call("GET", cluster_path(API_VERSION, TASK_KIND)))
        return list(listed.get("items", [])), str(listed["metadata"]["resourceVersion"])

    async def watch_tasks(
        self, resource_version: str, timeout_seconds: int = 120
    ) -> AsyncIterator[TaskEvent]:
        """Every AgenticTask change after `resource_version`, bookmarks included, each
        line parsed once into a `TaskEvent` (`task_watch.decode`: the task validated
        straight from the line's bytes), until the server ends the watch (the caller
        watches again from the last resourceVersion it saw); `KubeError` status 410 when
        the version is too old to resume from (the caller lists again)."""
        query = [
            ("watch", "1"),
            ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(timeout_seconds)),
        ]
        path = cluster_path(API_VERSION, TASK_KIND)
        read_timeout = timeout_seconds + WATCH_READ_SLACK
        try:
            async for line in self._kube.stream_lines(path, query, read_timeout):
                yield decode(line)
        except _TRANSPORT as exc:
            raise _unreachable(exc) from None

    async def create_task(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        manifest = {"apiVersion": API_VERSION, "kind": TASK_KIND, **body}
        manifest["metadata"] = {"namespace": namespace, **(body.get("metadata") or {})}
        return await _call(self._kube.create(manifest))

    async def apply_task_status(
        self, namespace: str, name: str, resource_version: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Server-side apply of the platform's part of a task's status, only if the task
        is still at `resource_version` (`KubeConflict` otherwise)."""
        body = {
            "apiVersion": API_VERSION,
            "kind": TASK_KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": resource_version,
            },
            "status": status,
        }
        return await _call(self._kube.apply(body, subresource="status"))

    async def annotate_task(
        self, namespace: str, name: str, annotations: dict[str, str]
    ) -> dict[str, Any]:
        """Merge-patch annotations of an AgenticTask (`humanwork.io/archived` once the
        platform archived the finished task); answers the patched object."""
        patch = {"metadata": {"annotations": annotations}}
        return await _call(self._kube.merge_patch(API_VERSION, TASK_KIND, namespace, name, patch))

    # --- AgentInstances and the operator's published key material -----------------------

    async def get_agent_instance(self, namespace: str, name: str) -> dict[str, Any]:
        return await _call(self._kube.call("GET", self._path(INSTANCE_KIND, namespace, name)))

    # the org's agents: the router chooses among them, corrections are pushed to each
    async def list_agent_instances(self, namespace: str) -> list[dict[str, Any]]:
        """The AgentInstances of `namespace` (an org has a handful: one page)."""
        found = await _call(self._kube.call("GET", self._path(INSTANCE_KIND, namespace)))
        return list(found.get("items", []))

    async def annotate_agent_instance(
        self, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        """Merge-patch annotations of an AgentInstance (the agent's acknowledged config
        hash, a rotation request): the only write the platform makes to AgentInstances."""
        patch = {"metadata": {"annotations": annotations}}
        await _call(self._kube.merge_patch(API_VERSION, INSTANCE_KIND, namespace, name, patch))

    # AgentInstances managed through the platform -------------------

    async def create_agent_instance(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        manifest = {"apiVersion": API_VERSION, "kind": INSTANCE_KIND, **body}
        manifest["metadata"] = {"namespace": namespace, **(body.get("metadata") or {})}
        return await _call(self._kube.create(manifest))

    async def patch_agent_instance_spec(
        self, namespace: str, name: str, resource_version: str, spec: dict[str, Any]
    ) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of an AgentInstance's spec, only if the instance is
        still at `resource_version` (`KubeConflict` otherwise)."""
        body = {"metadata": {"resourceVersion": resource_version}, "spec": spec}
        return await _call(
            self._kube.merge_patch(API_VERSION, INSTANCE_KIND, namespace, name, body)
        )

    async def delete_agent_instance(self, namespace: str, name: str) -> None:
        """Delete an AgentInstance; its children go with it (owner references)."""
        path = self._path(INSTANCE_KIND, namespace, name)
        await _call(self._kube.call("DELETE", path))

    async def config_map_data(self, namespace: str, name: str) -> dict[str, str]:
        found = await _call(self._kube.call("GET", path_for("v1", "ConfigMap", namespace, name)))
        return dict(found.get("data") or {})

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        """One value of a Secret, decoded. The platform reads exactly one Secret: the
        callback master key (its RBAC names it)."""
        found = await _call(self._kube.call("GET", path_for("v1", "Secret", namespace, name)))
        raw = (found.get("data") or {}).get(key)
        if raw is None:
            raise KubeNotFound(404, "NotFound", f"Secret {namespace}/{name} has no key {key!r}")
        return base64.b64decode(raw).decode()

    # --- namespaces -----------------------------------------------------------------------

    async def create_namespace(self, name: str, labels: dict[str, str]) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": labels},
        }
        await _call(self._kube.create(body))

    async def namespace_labels(self, name: str) -> dict[str, str]:
        found = await _call(self._kube.call("GET", path_for("v1", "Namespace", None, name)))
        return dict((found.get("metadata") or {}).get("labels") or {})
