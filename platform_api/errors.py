"""The platform API's one error hierarchy and its one JSON error shape.

Every error the API answers with is a `PlatformError` (a `HumanworkError`, so it carries
a stable `code`) with an HTTP status; `install_error_handlers` maps these, FastAPI's own
validation errors and Starlette's HTTP errors (unknown route, wrong method) to the body
`{"code": ..., "message": ..., "details": {...}}`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from asyncpg import PostgresError  # type: ignore[import-untyped]
from fastapi import FastAPI, Request
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field
from sqlalchemy.exc import DBAPIError
from starlette.exceptions import HTTPException as StarletteHTTPException

from humanwork_core import taskflow
from humanwork_core.errors import HumanworkError
from humanwork_core.kube_errors import KubeError, KubeUnreachable

log = logging.getLogger(__name__)


class ErrorBody(BaseModel):
    """The JSON body of every error response."""

    code: str = Field(description="stable machine-readable code", examples=["not_found"])
    message: str = Field(description="human-readable explanation", examples=["no such org"])
    details: dict[str, Any] = Field(default_factory=dict, description="code-specific data")


class PlatformError(HumanworkError):
    """Base of the errors the platform API answers with: every domain error of the
    platform (the upstream adapters' included, `tools.upstreams.errors`) subclasses it
    with its `code` and HTTP `status_code`, and `install_error_handlers` answers it."""

    code: ClassVar[str] = "internal_error"
    status_code: int = 500
    headers: ClassVar[dict[str, str]] = {}
    answers: ClassVar[tuple[type[Exception], ...]] = ()
    """The shared core's errors (a `taskflow` refusal, a `KubeError`) this class answers
    for; `from_core` picks the class listing the nearest one."""

    @classmethod
    def answering(cls, exc: Exception) -> PlatformError:
        """This error for the core's `exc`: its message, `details.reason` its code."""
        assert isinstance(exc, HumanworkError)
        return cls(exc.message, reason=exc.code, **exc.details)

    def public_details(self) -> dict[str, Any]:
        """The `details` of the error's JSON body (its own details unless a subclass
        keeps some internal)."""
        return dict(self.details)

    def response_headers(self) -> dict[str, str]:
        """The headers of the error's answer (the class's, unless the error computes them)."""
        return dict(self.headers)

    def body(self) -> dict[str, Any]:
        """The error's JSON body: code, message and public details."""
        return {"code": self.code, "message": self.message, "details": self.public_details()}


class NotFound(PlatformError):
    """The resource does not exist or belongs to an org the caller is not a member of."""

    code = "not_found"
    status_code = 404
    answers = (taskflow.StepNotFound,)


class Unauthenticated(PlatformError):
    """No valid credentials: missing, expired, forged or foreign tokens, wrong passwords."""

    code = "unauthenticated"
    status_code = 401
    headers: ClassVar[dict[str, str]] = {"WWW-Authenticate": "Bearer"}


class Forbidden(PlatformError):
    """The caller is known but its role lacks the capability the endpoint requires."""

    code = "forbidden"
    status_code = 403


class ValidationFailed(PlatformError):
    """The request is well-formed JSON but its content is not acceptable."""

    code = "validation_failed"
    status_code = 422


class Conflict(PlatformError):
    """The request conflicts with the current state (for example a duplicate name)."""

    code = "conflict"
    status_code = 409


class Unavailable(PlatformError):
    """A feature the request needs is not configured on this deployment."""

    code = "unavailable"
    status_code = 503


class DatabaseUnavailable(PlatformError):
    """The platform's database did not answer (restarting, failing over, unreachable): the
    request stopped there. Send it again with the same idempotency key: decisions, tool
    calls and events are answered from the first wherever it got."""

    code = "database_unavailable"
    status_code = 503
    headers: ClassVar[dict[str, str]] = {"Retry-After": "1"}


class KubernetesError(PlatformError):
    """The Kubernetes API refused or failed a request the platform made (`details.status`:
    the client's status)."""

    code = "kubernetes_error"
    status_code = 502
    answers: ClassVar[tuple[type[Exception], ...]] = (KubeError,)
    summary: ClassVar[str] = "the Kubernetes API refused the request"
    kube_status: int | None = None

    @classmethod
    def answering(cls, exc: Exception) -> PlatformError:
        assert isinstance(exc, KubeError)
        log.error("Kubernetes API error: %s %s", exc.status, exc.reason)
        error = cls(cls.summary)
        error.kube_status = exc.status
        return error

    def public_details(self) -> dict[str, Any]:
        extra = {} if self.kube_status is None else {"status": self.kube_status}
        return {**self.details, **extra}


class KubernetesUnavailable(KubernetesError):
    """No Kubernetes API is configured, or it cannot be reached."""

    code = "kubernetes_unavailable"
    status_code = 503
    answers = (KubeUnreachable,)
    summary = "the Kubernetes API is unreachable"


class RunStateConflict(PlatformError):
    """The task is not in a state that allows this decision: the step is not the current
    one, it was already decided (perhaps by another expert a moment ago), or the task
    ended."""

    code = "run_state_conflict"
    status_code = 409
    answers = (
        taskflow.StepNotDecidable,
        taskflow.StepAlreadyDecided,
        taskflow.TaskTerminal,
        taskflow.ApprovalConflict,
    )


class HumanTaskExpired(PlatformError):
    """The decision deadline passed and the escalation budget is spent."""

    code = "human_task_expired"
    status_code = 410
    answers = (taskflow.HumanTaskExpired,)


class SelfApproval(PlatformError):
    """The requester of a task cannot approve its own steps."""

    code = "self_approval_forbidden"
    status_code = 403


class TaskCancelRequested(PlatformError):
    """A tool call for a task someone asked to cancel: refused at once, before the
    operator has moved the task to `Cancelled`."""

    code = "task_cancel_requested"
    status_code = 409


class PayloadTooLarge(PlatformError):
    """A request body over its documented limit, refused before it is parsed or stored;
    `details.limit` is the limit in bytes."""

    code = "payload_too_large"
    status_code = 413


class DuplicateApprover(PlatformError):
    """This expert already approved the step; the next approval must come from another."""

    code = "duplicate_approver"
    status_code = 409
    answers = (taskflow.DuplicateApprover,)


class StepHashMismatch(PlatformError):
    """The expert decided on a different version of the step than the task holds."""

    code = "step_hash_mismatch"
    status_code = 409
    answers = (taskflow.StepHashMismatch,)


class NotInitiatingClient(PlatformError):
    """Only the client who initiated the task (its vouched requester, holding
    `steps.confirm`) confirms or declines its steps: not another client, an expert, an
    admin or the agent."""

    code = "not_initiating_client"
    status_code = 403


class ConfirmationStale(PlatformError):
    """The client confirmed another version of the step than the task holds (an expert
    edited it since, or the confirmation is a replay): read the task and confirm again."""

    code = "confirmation_stale"
    status_code = 409
    answers = (taskflow.ConfirmationStale,)


class ConfirmationRefused(PlatformError):
    """The step cannot be confirmed or declined now; `details.reason` says why
    (confirmation_not_required, step_declined, confirmation_closed); a task that ended
    answers `run_state_conflict`."""

    code = "confirmation_refused"
    status_code = 409
    answers = (
        taskflow.ConfirmationNotRequired,
        taskflow.StepDeclined,
        taskflow.StepConfirmationClosed,
    )


class IdempotencyConflict(PlatformError):
    """The idempotency key was already used for a different request."""

    code = "idempotency_conflict"
    status_code = 422
    answers = (taskflow.IdempotencyConflict,)


class InvalidDecision(PlatformError):
    """The verdict does not fit the step or lacks its payload (any other refusal of the
    task flow)."""

    code = "invalid_decision"
    status_code = 422
    answers = (taskflow.TaskFlowError,)


class SignatureRefused(PlatformError):
    """A signed agent event was refused; `details.reason` says why (signature_missing,
    signature_malformed, signature_mismatch, signature_expired, unknown_agent, wrong_org)."""

    code = "signature_refused"
    status_code = 401


class ScopeMissing(PlatformError):
    """The agent token does not carry the scope the endpoint needs."""

    code = "scope_missing"
    status_code = 403


class ToolNotPermitted(PlatformError):
    """The org has not enabled the tool for its agents (or the AgentInstance does not
    list it among its tools)."""

    code = "tool_not_permitted"
    status_code = 403


# --- the org's tool config, enforced by the proxy ------------------------------------------


class ToolActionNotAllowed(PlatformError):
    """The org's config of the tool does not list this action (`allowedActions`): refused
    before any upstream call."""

    code = "tool_action_not_allowed"
    status_code = 403


class ToolRateLimited(PlatformError):
    """The org's agents used up the tool's `ratePerHour` for this hour (counted in the
    database, so across replicas); `Retry-After` says when the next hour starts."""

    code = "tool_rate_limited"
    status_code = 429

    def response_headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.details.get("retryAfterSeconds", 60))}


# --- end of the tool config's errors -------------------------------------------------------


class StepNotApproved(PlatformError):
    """A side-effecting tool call that no expert approved, exactly as called;
    `details.reason` is the state machine's code (not_approved, step_hash_mismatch,
    tool_call_mismatch, step_not_executable, task_terminal, execution_conflict)."""

    code = "step_not_approved"
    status_code = 403


class ToolCallInProgress(PlatformError):
    """A call with this idempotency key is running now; retry with the same key later."""

    code = "tool_call_in_progress"
    status_code = 409
    headers: ClassVar[dict[str, str]] = {"Retry-After": "1"}


class ToolCallOutcomeUnknown(PlatformError):
    """A side-effecting call for this step reached the upstream, and whether it took effect
    is unknown (a timeout, a connection broken after sending, a 5xx answer to a write).
    The claim is kept: every later call for the step answers this, without touching the
    upstream, until an expert resolves it (`POST /human-tasks/{ns}/{name}/{step}/resolve`).
    Never retry automatically."""

    code = "tool_call_outcome_unknown"
    status_code = 409


class AgentUnreachable(PlatformError):
    """The platform could not reach an org's agent."""

    code = "agent_unreachable"
    status_code = 502


class AgentRefused(PlatformError):
    """An org's agent refused a command; `details.agentCode` is its error code."""

    code = "agent_refused"
    status_code = 502


# --- managed agents and org deactivation --------------------------------------------------


class AgentSpecInvalid(PlatformError):
    """An AgentInstance spec sent to the platform is not valid (the CRD's own model refused
    it, or the API server's schema, CEL rules or admission policies did);
    `details.errors` or `details.reason` say why."""

    code = "agent_spec_invalid"
    status_code = 422

    def __init__(
        self, message: str, errors: list[dict[str, Any]] | None = None, **details: str
    ) -> None:
        super().__init__(message, **details)
        self.errors = list(errors or [])

    def public_details(self) -> dict[str, Any]:
        extra = {"errors": self.errors} if self.errors else {}
        return {**self.details, **extra}


class AgentBoundsExceeded(PlatformError):
    """An AgentInstance spec holds something beyond the bounds the platform team set for
    every agent (image, egress CIDR, toleration, node selector, runtime class, resources):
    `details.field` names the field, `details.bound` the bound (a key of the admission
    parameters), `details.violations` every one found; nothing was written."""

    code = "agent_bounds_exceeded"
    status_code = 422

    def __init__(self, message: str, violations: list[dict[str, str]], **details: str) -> None:
        super().__init__(message, **details)
        self.violations = list(violations)

    def public_details(self) -> dict[str, Any]:
        return {**self.details, "violations": self.violations}


class AgentNotReady(PlatformError):
    """The org's agent exists but is not provisioned yet (no endpoint): try again once it
    is Ready."""

    code = "agent_not_ready"
    status_code = 409


class OrgDeactivated(PlatformError):
    """The org is deactivated: it takes no new work until it is reactivated."""

    code = "org_deactivated"
    status_code = 409


def _answering_classes(base: type[PlatformError]) -> list[type[PlatformError]]:
    found = [base]
    for sub in base.__subclasses__():
        found += _answering_classes(sub)
    return found


def from_core(exc: Exception) -> PlatformError:
    """The platform's answer to an error of the shared core (a `taskflow` refusal, a
    `KubeError`): the class whose `answers` lists the error's class or its nearest base;
    `exc` itself when it is already a `PlatformError`."""
    if isinstance(exc, PlatformError):
        return exc
    classes = _answering_classes(PlatformError)
    for klass in type(exc).__mro__:
        for answer in classes:
            if klass in answer.answers:
                return answer.answering(exc)
    raise TypeError(f"no platform error answers {type(exc).__name__}")


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthenticated",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    410: "gone",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_failed",
}


def error_responses(
    *statuses: int, codes: dict[int, tuple[str, str]] | None = None
) -> dict[int | str, dict[str, Any]]:
    """OpenAPI `responses` entries for the given error statuses, all with `ErrorBody`;
    `codes` overrides the example (code, message) of some statuses."""
    examples = {
        401: ("unauthenticated", "missing or invalid bearer token"),
        403: ("forbidden", "capability run.control required"),
        404: ("not_found", "no such org"),
        409: ("conflict", "an org with this slug exists"),
        422: ("validation_failed", "request validation failed"),
        410: ("human_task_expired", "the decision deadline passed"),
        503: ("unavailable", "integration credentials are not configured"),
    }
    out: dict[int | str, dict[str, Any]] = {}
    for status in statuses:
        code, message = (codes or {}).get(
            status, examples.get(status, (_HTTP_CODES.get(status, "error"), "error"))
        )
        out[status] = {
            "model": ErrorBody,
            "content": {
                "application/json": {"example": {"code": code, "message": message, "details": {}}}
            },
        }
    return out


def _body(code: str, message: str, details: dict[str, Any]) -> dict[str, Any]:
    return ErrorBody(code=code, message=message, details=details).model_dump()


async def _platform_error(_: Request, exc: Exception) -> JSONResponse:
    """The one handler of the error family (core errors answered through `from_core`)."""
    error = from_core(exc)
    return JSONResponse(
        _body(error.code, error.message, error.public_details()),
        status_code=error.status_code,
        headers=error.response_headers() or None,
    )


async def _validation_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = [
        {"loc": list(err.get("loc", ())), "msg": err.get("msg", ""), "type": err.get("type", "")}
        for err in exc.errors()
    ]
    return JSONResponse(
        _body("validation_failed", "request validation failed", {"errors": errors}),
        status_code=422,
    )


async def _http_error(_: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    message = exc.detail if isinstance(exc.detail, str) else code.replace("_", " ")
    return JSONResponse(
        jsonable_encoder(_body(code, message, {})),
        status_code=exc.status_code,
        headers=exc.headers,
    )


async def _unexpected(_: Request, exc: Exception) -> JSONResponse:
    log.error("unhandled error: %s", type(exc).__name__)
    return JSONResponse(_body("internal_error", "internal server error", {}), status_code=500)


_UNSTORABLE_TEXT = {"22021", "22P05"}
"""PostgreSQL's character_not_in_repertoire and untranslatable_character: text the
database cannot store, above all the NUL character (0x00)."""


_CONNECTION_LOST = ("08", "57P01", "57P02", "57P03")
"""SQLSTATEs of a lost or refused connection: class 08, and the server shutting down,
crashed or starting up."""


def _sqlstate(exc: Exception) -> str:
    """The SQLSTATE of a database error: SQLAlchemy's (from the driver's error it wraps) or
    the driver's own, raised by a statement sent on it directly (`db.autocommit_driver`)."""
    orig = exc.orig if isinstance(exc, DBAPIError) else exc
    return str(getattr(orig, "sqlstate", "") or "")


def _connection_lost(exc: Exception) -> bool:
    """Whether a database error says the server went away, not that the statement failed."""
    if isinstance(exc, ConnectionRefusedError | ConnectionResetError):
        return True  # asyncpg's connect, unwrapped by SQLAlchemy
    if isinstance(exc, PostgresError):
        return _sqlstate(exc).startswith(_CONNECTION_LOST)
    if not isinstance(exc, DBAPIError):
        return False
    closed = "connection" in type(exc.orig).__name__.lower()
    return exc.connection_invalidated or closed or _sqlstate(exc).startswith(_CONNECTION_LOST)


async def _database_error(request: Request, exc: Exception) -> JSONResponse:
    if _connection_lost(exc):
        log.warning("the database did not answer: %s", type(exc).__name__)
        return await _platform_error(
            request, DatabaseUnavailable("the platform's database did not answer; retry")
        )
    if _sqlstate(exc) in _UNSTORABLE_TEXT:
        return JSONResponse(
            _body(
                "validation_failed",
                "the request holds a character that cannot be stored (such as NUL)",
                {},
            ),
            status_code=422,
        )
    return await _unexpected(request, exc)


def install_error_handlers(app: FastAPI) -> None:
    """Map every error the app can raise to `ErrorBody`."""
    app.add_exception_handler(PlatformError, _platform_error)
    app.add_exception_handler(KubeError, _platform_error)
    app.add_exception_handler(DBAPIError, _database_error)
    app.add_exception_handler(PostgresError, _database_error)
    app.add_exception_handler(ConnectionRefusedError, _database_error)
    app.add_exception_handler(ConnectionResetError, _database_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
