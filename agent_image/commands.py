"""The platform -> agent command protocol (seed 002 section 4.2): signatures, bodies,
errors and the configuration overlay.

Every command (`/v1/chat`, `/v1/chat/stream`, `/v1/tasks`, `/v1/tasks/{id}/cancel`,
`/v1/configure`, `/v1/corrections`) must carry `X-Humanwork-Signature`, an HMAC-SHA256
of `<timestamp>.<raw body>` under the instance's callback secret
(:mod:`humanwork_core.signing`), within a five-minute window; the secret is re-read from
its mounted file on every request. A replay inside the window changes nothing: drafting a
reply, applying a configuration or correction, cancelling a task again are idempotent, and
`/v1/tasks` names its task after the request's idempotency key (the body's
`idempotencyKey`, else the `Idempotency-Key` header, else the signature itself), so the
same request makes the same task. `/v1/health` and `/v1/status` are open (probes).

Errors are one JSON shape, `{code, message, details}`, with stable codes:
`signature_missing`, `signature_malformed`, `signature_mismatch`, `signature_expired`
(401); `secret_unavailable` (503); `validation_failed` (422);
`not_found` (404); `method_not_allowed` (405); `task_terminal` (409);
`kubernetes_refused` (502, the API server refused the agent's write, with its status
and message in details); `kubernetes_unavailable` (503); `internal_error` (500).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator
from starlette.exceptions import HTTPException as StarletteHTTPException

from agent_image.config import LoadedConfig
from agent_image.kube import KubeError, KubeUnreachable
from agent_image.settings import AgentSettings
from humanwork_core import signing
from humanwork_core.errors import HumanworkError
from humanwork_core.resources import TaskPolicy
from humanwork_core.resources.common import NAME_PATTERN, UUID_PATTERN

LOG = logging.getLogger("humanwork.agent.commands")


# --- errors ----------------------------------------------------------------------------------


class AgentError(HumanworkError):
    """An error the agent answers with: a stable `code` and an HTTP status."""

    code: ClassVar[str] = "internal_error"
    status_code: ClassVar[int] = 500

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.details = dict(details)


class Unauthenticated(AgentError):
    """The command's signature is missing, malformed, wrong or stale."""

    code = "unauthenticated"
    status_code = 401

    def __init__(self, code: str, message: str, **details: Any) -> None:
        super().__init__(message, **details)
        self.error_code = code


class SecretUnavailable(AgentError):
    code = "secret_unavailable"
    status_code = 503


class ValidationFailed(AgentError):
    code = "validation_failed"
    status_code = 422


class NotFound(AgentError):
    code = "not_found"
    status_code = 404


class TaskTerminalError(AgentError):
    code = "task_terminal"
    status_code = 409


class KubernetesRefused(AgentError):
    code = "kubernetes_refused"
    status_code = 502


class KubernetesUnavailable(AgentError):
    code = "kubernetes_unavailable"
    status_code = 503


def kube_error(exc: KubeError) -> AgentError:
    """The agent's error for a failed Kubernetes API call: unavailable when the API is
    unreachable, else refused (with the API server's status and reason)."""
    if isinstance(exc, KubeUnreachable):
        return KubernetesUnavailable(f"the Kubernetes API is unreachable: {exc.message}")
    return KubernetesRefused(
        f"the Kubernetes API refused: {exc.message}", status=exc.status, reason=exc.reason
    )


def error_body(code: str, message: str, details: Mapping[str, Any] | None = None) -> dict[str, Any]:
    return {"code": code, "message": message, "details": dict(details or {})}


def install_error_handlers(app: FastAPI) -> None:
    """Map every error to `{code, message, details}`."""

    async def agent_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, AgentError)
        code = exc.error_code if isinstance(exc, Unauthenticated) else exc.code
        headers = {"WWW-Authenticate": "HMAC"} if isinstance(exc, Unauthenticated) else None
        return JSONResponse(
            error_body(code, exc.message, exc.details), exc.status_code, headers=headers
        )

    async def invalid(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))} for e in exc.errors()
        ]
        return JSONResponse(
            error_body("validation_failed", "the request is not valid", {"errors": errors}), 422
        )

    async def http_error(_: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        codes = {404: "not_found", 405: "method_not_allowed"}
        code = codes.get(exc.status_code, "http_error")
        return JSONResponse(error_body(code, str(exc.detail)), exc.status_code)

    async def crash(_: Request, exc: Exception) -> JSONResponse:
        LOG.exception("unhandled error", exc_info=exc)
        return JSONResponse(error_body("internal_error", "the agent failed"), 500)

    app.add_exception_handler(AgentError, agent_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(Exception, crash)


# --- signatures ------------------------------------------------------------------------------


class CommandVerifier:
    """Checks the platform's signature on a command's raw body."""

    def __init__(
        self,
        settings: AgentSettings,
        *,
        tolerance_seconds: int = signing.DEFAULT_TOLERANCE_SECONDS,
    ) -> None:
        self.settings = settings
        self.tolerance = tolerance_seconds

    def _secret(self) -> str:
        try:
            secret = self.settings.callback_secret_file.read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise SecretUnavailable(f"the callback secret cannot be read: {exc}") from None
        if not secret:
            raise SecretUnavailable("the callback secret is empty")
        return secret

    def verify(self, header: str | None, body: bytes, now: datetime | None = None) -> int:
        """The request's signed timestamp; :class:`Unauthenticated` when refused."""
        moment = now or datetime.now(UTC)
        try:
            return signing.verify(
                self._secret(), header, body, moment, tolerance_seconds=self.tolerance
            )
        except signing.SignatureError as exc:
            raise Unauthenticated(exc.code, exc.message, **exc.details) from None

    async def body(self, request: Request) -> bytes:
        """The request's raw body, once its signature is verified."""
        raw = await request.body()
        self.verify(request.headers.get(signing.SIGNATURE_HEADER), raw)
        return raw


# --- bodies ----------------------------------------------------------------------------------

Model = TypeVar("Model", bound=BaseModel)


def parse(model: type[Model], raw: bytes) -> Model:
    """A verified raw body as `model`; :class:`ValidationFailed` when it does not fit."""
    try:
        return model.model_validate_json(raw or b"{}")
    except ValidationError as exc:
        errors = [
            {"loc": list(e.get("loc", ())), "msg": str(e.get("msg", ""))}
            for e in exc.errors(include_url=False)
        ]
        raise ValidationFailed("the request is not valid", errors=errors) from None


class _Body(BaseModel):
    model_config = ConfigDict(populate_by_name=True, extra="ignore")


class HistoryMessage(_Body):
    role: str = Field(pattern=r"^(user|assistant|system)$")
    content: str = Field(max_length=32_000)


class ChatRequest(_Body):
    """`POST /v1/chat` and `/v1/chat/stream`."""

    message: str = Field(min_length=1, max_length=32_000)
    conversation_id: str | None = Field(default=None, alias="conversationId", max_length=64)
    history: list[HistoryMessage] | None = Field(
        default=None,
        max_length=200,
        description="The conversation so far; fetched from the platform when absent and "
        "conversationId is given.",
    )
    context: list[str] | None = Field(
        default=None,
        max_length=20,
        description="Knowledge snippets; fetched from the platform's context API when absent.",
    )
    # the org's corrections, kept on the platform, sent with each chat command so
    # that a restarted agent or a new replica has them (stored when new or changed)
    corrections: list[CorrectionIn] | None = Field(default=None, max_length=500)


class TaskRequest(_Body):
    """`POST /v1/tasks`."""

    request: str = Field(min_length=1, max_length=4096)
    conversation_id: str | None = Field(default=None, alias="conversationId", pattern=UUID_PATTERN)
    requester: str = Field(
        min_length=1,
        max_length=253,
        description="Who asked (informational: the task says agent:<name> and the platform "
        "binds the requester it vouches for through planRequest).",
    )
    plan_request: str | None = Field(
        default=None,
        alias="planRequest",
        max_length=64,
        pattern=r"^[A-Za-z0-9-]+$",
        description="The platform's id of this plan request, put on the task as the "
        "annotation humanwork.io/plan-request.",
    )
    revises: str | None = Field(default=None, max_length=253, pattern=NAME_PATTERN)
    feedback: str | None = Field(
        default=None,
        max_length=4096,
        description="The rejection feedback to plan around (read from the revised task's "
        "status when absent).",
    )
    policy: dict[str, Any] | None = Field(
        default=None, description="The task's approval policy (AgenticTask spec.policy)."
    )
    idempotency_key: str | None = Field(
        default=None,
        alias="idempotencyKey",
        min_length=1,
        max_length=200,
        description="Names the task: the same key, the same task (also accepted as the "
        "Idempotency-Key header; signed only here, in the body).",
    )
    # the org's corrections, as with a chat command (a plan proposing what an
    # expert corrected for a similar request takes the expert's correction)
    corrections: list[CorrectionIn] | None = Field(default=None, max_length=500)

    @field_validator("policy")
    @classmethod
    def _policy(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else TaskPolicy.model_validate(value).to_wire()


class CancelRequest(_Body):
    """`POST /v1/tasks/{id}/cancel` (the body is optional)."""

    reason: str | None = Field(default=None, max_length=4096)
    by: str | None = Field(default=None, max_length=253)


class SpecialistUpdate(_Body):
    name: str | None = Field(default=None, min_length=1, max_length=253)
    system_prompt: str | None = Field(default=None, alias="systemPrompt", max_length=65_536)


class ConfigureRequest(_Body):
    """`POST /v1/configure`: the fields to change (camelCase as in config.json, or the
    seed's snake_case); `reset: true` drops every earlier pushed change first."""

    specialist: SpecialistUpdate | None = None
    model: str | None = Field(default=None, min_length=1, max_length=253)
    temperature: float | None = Field(default=None, ge=0, le=2)
    confidence_threshold: float | None = Field(
        default=None, alias="confidenceThreshold", ge=0, le=100
    )
    enabled_tools: list[str] | None = Field(default=None, alias="enabledTools", max_length=64)
    max_concurrent_tasks: int | None = Field(default=None, alias="maxConcurrentTasks", ge=1, le=100)
    default_mode: str | None = Field(
        default=None, alias="defaultMode", pattern=r"^(domain|agentic)$"
    )
    planning_lookups: bool | None = Field(
        default=None,
        alias="planningLookups",
        description="Let the planner make read-only tool calls while planning.",
    )
    reset: bool = False
    by: str | None = Field(default=None, max_length=253)

    def changes(self) -> dict[str, Any]:
        """The configuration keys (config.json's camelCase) this request sets."""
        out: dict[str, Any] = {}
        if self.specialist is not None:
            part = {}
            if self.specialist.name is not None:
                part["name"] = self.specialist.name
            if self.specialist.system_prompt is not None:
                part["systemPrompt"] = self.specialist.system_prompt
            if part:
                out["specialist"] = part
        for key, value in (
            ("model", self.model),
            ("temperature", self.temperature),
            ("confidenceThreshold", self.confidence_threshold),
            ("enabledTools", sorted(set(self.enabled_tools)) if self.enabled_tools else None),
            ("maxConcurrentTasks", self.max_concurrent_tasks),
            ("defaultMode", self.default_mode),
            ("planningLookups", self.planning_lookups),
        ):
            if value is not None:
                out[key] = value
        if self.enabled_tools is not None and not self.enabled_tools:
            out["enabledTools"] = []
        if isinstance(out.get("confidenceThreshold"), float):
            threshold = out["confidenceThreshold"]
            out["confidenceThreshold"] = int(threshold) if threshold.is_integer() else threshold
        return out


class CorrectionIn(_Body):
    message: str = Field(min_length=1, max_length=32_000, description="The client message.")
    corrected: str = Field(
        min_length=1,
        max_length=32_000,
        description="The reply the expert sent instead (also accepted as `correction`).",
        validation_alias=AliasChoices("corrected", "correction"),
    )
    draft: str | None = Field(default=None, max_length=32_000)
    note: str | None = Field(default=None, max_length=4096)
    id: str | None = Field(default=None, min_length=1, max_length=128)
    conversation_id: str | None = Field(default=None, alias="conversationId", max_length=64)
    by: str | None = Field(default=None, max_length=253)
    # what was corrected (see agent_image.corrections.Correction.kind)
    kind: str = Field(
        default="reply",
        pattern=r"^(reply|reply_edit|reply_rejected|step_edit|step_rejected)$",
    )
    at: str | None = Field(default=None, max_length=64)


class CorrectionsRequest(_Body):
    """`POST /v1/corrections`."""

    corrections: list[CorrectionIn] = Field(min_length=1, max_length=500)


# --- the configuration overlay ---------------------------------------------------------------


def canonical_hash(data: Mapping[str, Any]) -> str:
    """SHA-256 of the canonical JSON (sorted keys, no spaces, UTF-8) the operator writes."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class ConfigOverlay:
    """The platform's pushed changes (`POST /v1/configure`), kept in memory on top of the
    ConfigMap's `config.json`: keys set here win over the file's (a new file changes the
    rest), until a `reset` or a restart. With no overlay the effective configuration is
    the file and its hash is the file's (the AgentInstance's status.configHash)."""

    def __init__(self) -> None:
        self.values: dict[str, Any] = {}
        self.updated_by: str | None = None
        self.updated_at: str | None = None

    def apply(
        self, changes: Mapping[str, Any], *, reset: bool = False, by: str | None = None
    ) -> None:
        if reset:
            self.values = {}
        for key, value in changes.items():
            if key == "specialist" and isinstance(value, Mapping):
                self.values["specialist"] = {**dict(self.values.get("specialist") or {}), **value}
            else:
                self.values[key] = value
        self.updated_by = by
        self.updated_at = datetime.now(UTC).isoformat()

    def effective(self, base: LoadedConfig) -> tuple[dict[str, Any], str]:
        """The merged configuration and its hash."""
        if not self.values:
            return dict(base.data), base.config_hash
        merged = dict(base.data)
        for key, value in self.values.items():
            if key == "specialist" and isinstance(merged.get("specialist"), Mapping):
                merged["specialist"] = {**dict(merged["specialist"]), **dict(value)}
            else:
                merged[key] = value
        return merged, canonical_hash(merged)
