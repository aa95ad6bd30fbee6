"""Signed commands from the platform to an org's agent: find the agent, sign, send.

Every platform -> agent command goes through here (planning a request today; drafting a
reply, pushing corrections, asking for a revised plan as they come). The platform signs
each command's body with the instance's callback secret (HMAC-SHA256 over the timestamp
and the body, the secret derived from the master key with
`humanwork_core.signing.derive_secret`), so an agent obeys only the platform.

The agent is reached at its AgentInstance's `status.endpoint` (its Service) unless
`HUMANWORK_AGENT_ENDPOINTS` (or the file `HUMANWORK_AGENT_ENDPOINTS_FILE`) names another
URL for it (agents run as local processes in development).

Errors are the platform's own: `NotFound` for an org or agent the caller may not see,
`AgentNotReady` (409) for an agent not provisioned yet (no endpoint),
`AgentUnreachable` (502) when the agent cannot be reached, `AgentRefused` (502, the
agent's own code in the details) when it answers with an error.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any

import httpx
from fastapi import Depends

from humanwork_core import signing, tracing
from platform_api.db import Session
from platform_api.errors import (
    AgentNotReady,
    AgentRefused,
    AgentUnreachable,
    KubernetesUnavailable,
    NotFound,
)
from platform_api.kube.client import KubeClient, KubeNotFound
from platform_api.kube.published import CallbackKey
from platform_api.models import Org
from platform_api.settings import Settings
from platform_api.slots import Slot


@dataclass(frozen=True)
class AgentTarget:
    """An org's agent as the platform addresses it."""

    org: Org
    name: str
    instance: dict[str, Any]

    @property
    def agent_id(self) -> str:
        """`<namespace>/<name>`."""
        return f"{self.org.namespace}/{self.name}"


def endpoint_override(settings: Settings, agent_id: str) -> str | None:
    """The development override of an agent's URL, if any."""
    if agent_id in settings.agent_endpoints:
        return settings.agent_endpoints[agent_id]
    if settings.agent_endpoints_file is not None:
        try:
            mapping = json.loads(settings.agent_endpoints_file.read_text())
        except (OSError, ValueError):
            return None
        found = mapping.get(agent_id) if isinstance(mapping, dict) else None
        return str(found) if found else None
    return None


def require_kube(kube: KubeClient | None, what: str) -> KubeClient:
    """The platform's Kubernetes client, or 503 `kubernetes_unavailable` naming `what`."""
    if kube is None:
        raise KubernetesUnavailable(f"{what} needs the Kubernetes API")
    return kube


async def org_agent(
    session: Session, kube: KubeClient, org_id: uuid.UUID, name: str
) -> AgentTarget:
    """The org and its AgentInstance `name`; NotFound for either missing, or an instance of
    another org."""
    org = await session.get(Org, org_id)
    if org is None:
        raise NotFound("no such org")
    try:
        instance = await kube.get_agent_instance(org.namespace, name)
    except KubeNotFound:
        raise NotFound("no such agent") from None
    if str((instance.get("spec") or {}).get("orgId")) != str(org.id):
        raise NotFound("no such agent")
    return AgentTarget(org=org, name=name, instance=instance)


class AgentCommands:
    """Sends signed commands to agents with the platform's HTTP client; built once by the
    app."""

    def __init__(
        self,
        settings: Settings,
        kube: KubeClient | None,
        callback_key: CallbackKey,
        http: httpx.AsyncClient | None,
    ) -> None:
        self._settings = settings
        self._kube = kube
        self._callback_key = callback_key
        self._http = http

    def endpoint(self, target: AgentTarget) -> str:
        """The agent's base URL, or AgentUnreachable when it has none yet."""
        url = endpoint_override(self._settings, target.agent_id) or str(
            (target.instance.get("status") or {}).get("endpoint") or ""
        )
        if not url:  # not provisioned yet is a state, not a gateway failure
            raise AgentNotReady("the agent has no endpoint yet", agent=target.agent_id)
        return url.rstrip("/")

    async def secret(self, target: AgentTarget) -> str:
        """The agent's callback secret, derived from the installation's master key."""
        kube = require_kube(self._kube, "signing a command")
        master = await self._callback_key.get(kube)
        if master is None:
            raise AgentUnreachable(
                "no callback key: the operator has not run", agent=target.agent_id
            )
        uid = str(target.instance["metadata"].get("uid", ""))
        return signing.derive_secret(master, target.org.namespace, target.name, uid)

    async def _request(
        self, target: AgentTarget, payload: dict[str, Any], idempotency_key: str | None
    ) -> tuple[bytes, dict[str, str]]:
        raw = json.dumps(payload).encode()
        headers = {
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(
                await self.secret(target), raw, datetime.now(UTC)
            ),
        }
        if idempotency_key:
            headers[signing.IDEMPOTENCY_HEADER] = idempotency_key
        headers.update(tracing.headers())  # the current span, to the agent
        return raw, headers

    def _client(self, target: AgentTarget) -> httpx.AsyncClient:
        client = self._http
        if client is None:
            raise AgentUnreachable(
                "the platform's HTTP client is not running", agent=target.agent_id
            )
        return client

    async def send(
        self,
        target: AgentTarget,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """POST the signed command to `path` on the agent; its JSON answer, or
        AgentUnreachable / AgentRefused."""
        url = f"{self.endpoint(target)}{path}"
        raw, headers = await self._request(target, payload, idempotency_key)
        try:
            answer = await self._client(target).post(
                url,
                content=raw,
                headers=headers,
                timeout=self._settings.agent_timeout_seconds,
            )
        except httpx.HTTPError as exc:
            raise AgentUnreachable(
                "the agent did not answer", agent=target.agent_id, reason=type(exc).__name__
            ) from None
        if answer.status_code not in (200, 201, 202):
            raise _refused(target, answer.status_code, answer.content)
        try:
            body = answer.json()
        except ValueError:
            raise _refused(target, answer.status_code, b"") from None
        return body if isinstance(body, dict) else {"items": body}

    async def stream(
        self, target: AgentTarget, path: str, payload: dict[str, Any]
    ) -> AsyncIterator[str]:
        """POST the signed command to `path` and yield the agent's answer line by line
        (for a `text/event-stream` answer)."""
        url = f"{self.endpoint(target)}{path}"
        raw, headers = await self._request(target, payload, None)
        headers["Accept"] = "text/event-stream"
        timeout = self._settings.agent_timeout_seconds
        try:
            async with self._client(target).stream(
                "POST", url, content=raw, headers=headers, timeout=timeout
            ) as answer:
                if answer.status_code != 200:
                    raise _refused(target, answer.status_code, await answer.aread())
                async for line in answer.aiter_lines():
                    yield line
        except httpx.HTTPError as exc:
            raise AgentUnreachable(
                "the agent did not answer", agent=target.agent_id, reason=type(exc).__name__
            ) from None


def _refused(target: AgentTarget, status: int, content: bytes) -> AgentRefused:
    """The agent's error answer as AgentRefused, with the agent's own code."""
    try:
        found = json.loads(content or b"{}")
        code = str(found.get("code", "error")) if isinstance(found, dict) else "error"
    except ValueError:
        code = "error"
    return AgentRefused(
        "the agent refused the request",
        agent=target.agent_id,
        agentCode=code,
        agentStatus=str(status),
    )


COMMANDS: Slot[AgentCommands] = Slot("commands")
Commands = Annotated[AgentCommands, Depends(COMMANDS)]
"""The platform's signed commands to its agents."""
