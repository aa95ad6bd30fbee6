"""`KubeClient`: the only module of the platform API that talks to the Kubernetes API.

Async throughout (`kubernetes_asyncio`), so a request never blocks the event loop. It
knows exactly what the platform does with Kubernetes: read, list and create AgenticTasks,
write the platform's part of a task's status by server-side apply (field manager
`humanwork-platform-api`) with a resourceVersion precondition, and create (or read) org
namespaces. API errors become the small `KubeError` family below, so callers never see
the client library's exception types.

Configured by `Settings`: `HUMANWORK_KUBECONFIG` (a kubeconfig file) or
`HUMANWORK_KUBE_IN_CLUSTER=true` (the pod's ServiceAccount); `from_settings` answers
None when neither is set.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator, Awaitable
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config, watch
from kubernetes_asyncio.client.rest import ApiException

from humanwork_core.kube_body import APPLY_CONTENT_TYPE, encode_body
from humanwork_core.kube_errors import (
    KubeConflict,
    KubeError,
    KubeInvalid,
    KubeNotFound,
    KubeUnreachable,
    error_from_status,
)
from humanwork_core.kube_pool import reuse_most_recent_first
from humanwork_core.resources import common as resources
from humanwork_core.resources import names
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
TASKS = names.TASKS
TASK_KIND = "AgenticTask"
AGENT_INSTANCES = names.INSTANCES
FIELD_MANAGER = names.PLATFORM_FIELD_MANAGER
_APPLY_OPTIONS: dict[str, Any] = {"_content_type": APPLY_CONTENT_TYPE}
"""Server-side apply: the generated client takes the content type as an option; the body
goes as bytes (humanwork_core.kube_body)."""


_MERGE_OPTIONS: dict[str, Any] = {"_content_type": "application/merge-patch+json"}


USER_AGENT = "humanwork-platform-api/0.1.0"


def _error(exc: ApiException) -> KubeError:
    try:
        body: Any = json.loads(exc.body or "{}")
    except (TypeError, ValueError):
        body = {}
    if not isinstance(body, dict):
        body = {}
    body.setdefault("reason", str(exc.reason or ""))
    body.setdefault("message", str(exc.reason or ""))
    return error_from_status(int(exc.status or 0), body)


async def _call(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except ApiException as exc:
        raise _error(exc) from None
    except (aiohttp.ClientError, OSError, TimeoutError) as exc:
        raise KubeUnreachable(503, "Unreachable", type(exc).__name__) from None


class KubeClient:
    """The platform's calls to the Kubernetes API, under the platform's identity."""

    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)

    @classmethod
    async def from_settings(cls, settings: Settings) -> KubeClient | None:
        """A client for the configured cluster, or None when Kubernetes is not configured."""
        if not settings.kubeconfig and not settings.kube_in_cluster:
            return None
        cfg = client.Configuration()
        if settings.kubeconfig:
            await config.load_kube_config(config_file=settings.kubeconfig, client_configuration=cfg)
        else:
            config.load_incluster_config(client_configuration=cfg)  # type: ignore[no-untyped-call]
        cfg.connection_pool_maxsize = settings.kube_connections
        api = client.ApiClient(cfg)
        # the surplus connections of a burst are closed once idle, not kept for ever
        reuse_most_recent_first(api.rest_client.pool_manager.connector)
        api.user_agent = USER_AGENT  # names the platform in the API server's audit log
        return cls(api)

    async def close(self) -> None:
        await self._api.close()

    # --- AgenticTasks ---------------------------------------------------------------------

    async def get_task(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await _call(
            self._custom.get_namespaced_custom_object(GROUP, VERSION, namespace, TASKS, name)
        )
        return found

    async def list_tasks(self, namespace: str) -> list[dict[str, Any]]:
        """Every AgenticTask of `namespace` (read in pages of 500)."""
        items: list[dict[str, Any]] = []
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": 500}
            if token:
                kwargs["_continue"] = token
            page = await _call(
                self._custom.list_namespaced_custom_object(
                    GROUP, VERSION, namespace, TASKS, **kwargs
                )
            )
            items.extend(page.get("items", []))
            token = page.get("metadata", {}).get("continue")
            if not token:
                return items

    async def list_task_pages(
        self, limit: int = 500
    ) -> AsyncIterator[tuple[list[dict[str, Any]], str]]:
        """Every AgenticTask of the cluster, `limit` at a time, each page with the list's
        resourceVersion (one snapshot: the version to watch from once the last page is
        in): one unpaged list of 100,000 tasks is ~200 MB of JSON parsed at once."""
        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"limit": limit}
            if token:
                kwargs["_continue"] = token
            page = await _call(
                self._custom.list_cluster_custom_object(GROUP, VERSION, TASKS, **kwargs)
            )
            meta = page.get("metadata", {})
            yield list(page.get("items", [])), str(meta["resourceVersion"])
            token = meta.get("continue")
            if not token:
                return

    async def list_all_tasks(self) -> tuple[list[dict[str, Any]], str]:
        """Every AgenticTask of the cluster and the resourceVersion to watch from."""
        listed = await _call(self._custom.list_cluster_custom_object(GROUP, VERSION, TASKS))
        return list(listed.get("items", [])), str(listed["metadata"]["resourceVersion"])

    async def watch_tasks(
        self, resource_version: str, timeout_seconds: int = 120
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """(event type, object) of every AgenticTask change after `resource_version`,
        bookmarks included, until the server ends the watch; `KubeError` status 410 when
        the version is too old to resume from."""
        stream = watch.Watch().stream(
            self._custom.list_cluster_custom_object,
            GROUP,
            VERSION,
            TASKS,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
        )
        try:
            async for event in stream:
                yield str(event["type"]), dict(event["raw_object"])
        except ApiException as exc:
            raise _error(exc) from None
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise KubeUnreachable(503, "Unreachable", type(exc).__name__) from None
        finally:
            await stream.close()

    async def create_task(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        made: dict[str, Any] = await _call(
            self._custom.create_namespaced_custom_object(
                GROUP, VERSION, namespace, TASKS, body, field_manager=FIELD_MANAGER
            )
        )
        return made

    async def apply_task_status(
        self, namespace: str, name: str, resource_version: str, status: dict[str, Any]
    ) -> dict[str, Any]:
        """Server-side apply of the platform's part of a task's status, only if the task
        is still at `resource_version` (`KubeConflict` otherwise)."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": TASK_KIND,
            "metadata": {
                "name": name,
                "namespace": namespace,
                "resourceVersion": resource_version,
            },
            "status": status,
        }
        applied: dict[str, Any] = await _call(
            self._custom.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                namespace,
                TASKS,
                name,
                encode_body(body),
                field_manager=FIELD_MANAGER,
                force=True,
                **_APPLY_OPTIONS,
            )
        )
        return applied

    async def annotate_task(
        self, namespace: str, name: str, annotations: dict[str, str]
    ) -> dict[str, Any]:
        """Merge-patch annotations of an AgenticTask (`humanwork.io/archived` once the
        platform archived the finished task); answers the patched object."""
        patched: dict[str, Any] = await _call(
            self._custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                TASKS,
                name,
                {"metadata": {"annotations": annotations}},
                field_manager=FIELD_MANAGER,
                **_MERGE_OPTIONS,
            )
        )
        return patched

    # --- AgentInstances and the operator's published key material -----------------------

    async def get_agent_instance(self, namespace: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = await _call(
            self._custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, AGENT_INSTANCES, name
            )
        )
        return found

    # the org's agents: the router chooses among them, corrections are pushed to each
    async def list_agent_instances(self, namespace: str) -> list[dict[str, Any]]:
        """The AgentInstances of `namespace` (an org has a handful: one page)."""
        found = await _call(
            self._custom.list_namespaced_custom_object(GROUP, VERSION, namespace, "agentinstances")
        )
        return list(found.get("items", []))

    async def annotate_agent_instance(
        self, namespace: str, name: str, annotations: dict[str, str]
    ) -> None:
        """Merge-patch annotations of an AgentInstance (the agent's acknowledged config
        hash, a rotation request): the only write the platform makes to AgentInstances."""
        await _call(
            self._custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                "agentinstances",
                name,
                {"metadata": {"annotations": annotations}},
                **_MERGE_OPTIONS,
            )
        )

    # AgentInstances managed through the platform -------------------

    async def create_agent_instance(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        made: dict[str, Any] = await _call(
            self._custom.create_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                AGENT_INSTANCES,
                body,
                field_manager=FIELD_MANAGER,
            )
        )
        return made

    async def patch_agent_instance_spec(
        self, namespace: str, name: str, resource_version: str, spec: dict[str, Any]
    ) -> dict[str, Any]:
        """JSON merge patch (RFC 7386) of an AgentInstance's spec, only if the instance is
        still at `resource_version` (`KubeConflict` otherwise)."""
        body = {"metadata": {"resourceVersion": resource_version}, "spec": spec}
        patched: dict[str, Any] = await _call(
            self._custom.patch_namespaced_custom_object(
                GROUP,
                VERSION,
                namespace,
                AGENT_INSTANCES,
                name,
                body,
                field_manager=FIELD_MANAGER,
                **_MERGE_OPTIONS,
            )
        )
        return patched

    async def delete_agent_instance(self, namespace: str, name: str) -> None:
        """Delete an AgentInstance; its children go with it (owner references)."""
        await _call(
            self._custom.delete_namespaced_custom_object(
                GROUP, VERSION, namespace, AGENT_INSTANCES, name
            )
        )

    async def config_map_data(self, namespace: str, name: str) -> dict[str, str]:
        found = await _call(self._core.read_namespaced_config_map(name, namespace))
        return dict(found.data or {})

    async def secret_value(self, namespace: str, name: str, key: str) -> str:
        """One value of a Secret, decoded. The platform reads exactly one Secret: the
        callback master key (its RBAC names it)."""
        found = await _call(self._core.read_namespaced_secret(name, namespace))
        raw = (found.data or {}).get(key)
        if raw is None:
            raise KubeNotFound(404, "NotFound", f"Secret {namespace}/{name} has no key {key!r}")
        return base64.b64decode(raw).decode()

    # --- namespaces -----------------------------------------------------------------------

    async def create_namespace(self, name: str, labels: dict[str, str]) -> None:
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
        await _call(self._core.create_namespace(body, field_manager=FIELD_MANAGER))

    async def namespace_labels(self, name: str) -> dict[str, str]:
        found = await _call(self._core.read_namespace(name))
        return dict(found.metadata.labels or {})
