"""The agent's HTTP API (FastAPI) and its runtime.

Commands from the platform (seed 002 section 4.2), each verified with the instance's
HMAC secret (see :mod:`agent_image.commands`):

    POST /v1/chat                 draft a reply: reply, confidence, risk_level, flag_for_review
    POST /v1/chat/stream          the same as Server-Sent Events, tokens as they come
    POST /v1/tasks                plan a request into an AgenticTask in the agent's namespace
    POST /v1/tasks/{id}/cancel    stop working on a task (see `cancel_task`)
    POST /v1/configure            hot reload of prompt, model, tools, threshold (overlay)
    POST /v1/corrections          expert corrections into the local few-shot store
    GET  /v1/health               liveness/readiness and the configuration hash (open)
    GET  /v1/status               identity, model, running tasks, uptime (open)

:class:`Runtime` holds everything the agent works with; `create_app(settings,
background=...)` starts each background job `job(runtime)` with the app (the executor
of approved steps is one; see :data:`BACKGROUND`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
from fastapi import Depends, FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse

from agent_image.commands import (
    AgentError,
    CancelRequest,
    ChatRequest,
    CommandVerifier,
    ConfigOverlay,
    ConfigureRequest,
    CorrectionsRequest,
    KubernetesRefused,
    KubernetesUnavailable,
    NotFound,
    TaskRequest,
    TaskTerminalError,
    ValidationFailed,
    error_body,
    install_error_handlers,
    parse,
)
from agent_image.config import ConfigHolder
from agent_image.corrections import Correction, CorrectionStore
from agent_image.events import EventSender
from agent_image.executor import run_executor
from agent_image.kube import KubeClient, KubeConflict, KubeError, KubeUnreachable
from agent_image.llm import Completion, LLMClient, llm_configured
from agent_image.planning.config import AgentConfig, LLMGate
from agent_image.planning.drafts import Plan
from agent_image.planning.llm import Planner
from agent_image.platform import PlatformClient, PlatformError
from agent_image.responder import Reply, Responder
from agent_image.settings import AgentSettings
from humanwork_core import keys, signing
from humanwork_core.requester import PLAN_REQUEST_ANNOTATION, agent_requester
from humanwork_core.resources import AgenticTaskSpec, TaskPhase

LOG = logging.getLogger("humanwork.agent")

BackgroundJob = Callable[["Runtime"], Awaitable[None]]
"""A job that runs for the app's lifetime, given the runtime (e.g. the step executor)."""

BACKGROUND: tuple[BackgroundJob, ...] = (run_executor,)
"""The background jobs `create_app` starts when none are passed: the executor of approved
steps (agent_image/executor.py)."""

MANAGED_BY = "humanwork-agent"
AGENT_LABEL = keys.AGENT_LABEL
PLANNER_ANNOTATION = keys.PLANNER
MODEL_ANNOTATION = keys.MODEL
MODE_ANNOTATION = keys.MODE
IDEMPOTENCY_ANNOTATION = keys.IDEMPOTENCY_KEY


class CancelRegistry:
    """Tasks the platform cancelled, kept in `<state dir>/cancelled.json` so that a
    restarted agent does not resume them."""

    def __init__(self, state_dir: Path) -> None:
        self.path = state_dir / "cancelled.json"
        try:
            self.entries: dict[str, dict[str, Any]] = dict(json.loads(self.path.read_text()))
        except (OSError, ValueError, TypeError):
            self.entries = {}

    def __contains__(self, name: object) -> bool:
        return name in self.entries

    def add(self, name: str, **info: Any) -> None:
        self.entries[name] = {"at": datetime.now(UTC).isoformat(), **info}
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_suffix(".tmp")
            tmp.write_text(json.dumps(self.entries, indent=1))
            tmp.replace(self.path)
        except OSError as exc:
            LOG.error("cannot persist the cancellation of %s: %s", name, exc)


@dataclass
class Runtime:
    """Everything the agent works with; one per process, built from the settings only."""

    settings: AgentSettings
    holder: ConfigHolder
    overlay: ConfigOverlay
    http: httpx.AsyncClient
    kube: KubeClient
    events: EventSender
    platform: PlatformClient
    llm: LLMClient | None
    gate: LLMGate
    planner: Planner
    responder: Responder
    corrections: CorrectionStore
    cancelled: CancelRegistry
    verifier: CommandVerifier
    started: float = field(default_factory=time.monotonic)
    tasks: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Tasks being worked on (the executor tracks them): name -> what /v1/status shows."""
    on_cancel: list[Callable[[str], Awaitable[None]]] = field(default_factory=list)
    """Called with a task's name when the platform cancels it (the executor stops it)."""

    # --- configuration ---------------------------------------------------------------------

    def config(self) -> AgentConfig:
        """The effective configuration: the ConfigMap's file with the pushed overlay."""
        data, digest = self.overlay.effective(self.holder.current)
        return AgentConfig(data, digest, self.settings.default_mode or None)

    # --- task bookkeeping (for the executor) -----------------------------------------------

    def track_task(self, name: str, **info: Any) -> None:
        """Record (or update) what the agent is doing with task `name`."""
        entry = self.tasks.setdefault(name, {"since": datetime.now(UTC).isoformat()})
        entry.update(info)

    def untrack_task(self, name: str) -> None:
        self.tasks.pop(name, None)

    def is_cancelled(self, name: str) -> bool:
        """Whether the platform cancelled task `name` (the executor runs none of its steps)."""
        return name in self.cancelled

    def state_dir(self) -> Path:
        self.settings.state_dir.mkdir(parents=True, exist_ok=True)
        return self.settings.state_dir

    # --- model audit -----------------------------------------------------------------------

    async def audit_llm(self, completion: Completion, purpose: str) -> None:
        payload = completion.audit(purpose)
        payload["promptVersion"] = self.config().config_hash
        await self.events.emit("llm.called", payload=payload)

    async def read_tool(
        self, tool: str, action: str, params: dict[str, Any], purpose: str = "plan"
    ) -> dict[str, Any]:
        """A read-only tool call through the platform's proxy (planning and chat need no
        approval for reads); the tool's result; emits `tool.called`; raises PlatformError."""
        key = str(uuid.uuid4())
        started = time.perf_counter()
        outcome = "ok"
        try:
            answer = await self.platform.call_tool(
                tool, action, params, key, None, None, attempts=2
            )
        except PlatformError as exc:
            outcome = exc.code
            raise
        finally:
            await self.events.emit(
                "tool.called",
                payload={
                    "tool": tool,
                    "action": action,
                    "params": params,
                    "purpose": purpose,
                    "outcome": outcome,
                    "latencyMs": round((time.perf_counter() - started) * 1000, 1),
                    "idempotencyKey": key,
                },
            )
        result = answer.get("result", answer)
        return dict(result) if isinstance(result, dict) else {"value": result}

    async def run_tool(self, tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        """A read-only tool call for a chat reply; an error becomes the result."""
        try:
            return await self.read_tool(tool, action, params, purpose="chat")
        except PlatformError as exc:
            return {"error": exc.to_dict()}

    # --- planning --------------------------------------------------------------------------

    def task_name(self, idempotency_key: str | None) -> str:
        """`<agent>-<10 hex>`: derived from the idempotency key when there is one, so a
        retried request names the same task."""
        if idempotency_key:
            seed = f"{self.settings.agent_id}\0{idempotency_key}".encode()
            suffix = hashlib.sha256(seed).hexdigest()[:10]
        else:
            suffix = uuid.uuid4().hex[:10]
        return f"{self.settings.agent_name}-{suffix}"

    async def _own_task(self, name: str) -> dict[str, Any] | None:
        try:
            task = await self.kube.get_task(name)
        except KubeError as exc:
            raise _kube_error(exc) from None
        if task is None:
            return None
        ref = ((task.get("spec") or {}).get("agentRef") or {}).get("name")
        return task if ref == self.settings.agent_name else None

    async def propose(
        self,
        request: str,
        requester: str,
        *,
        conversation_id: str | None = None,
        revises: str | None = None,
        feedback: str | None = None,
        policy: dict[str, Any] | None = None,
        idempotency_key: str | None = None,
        plan_request: str | None = None,
    ) -> tuple[dict[str, Any], Plan | None, bool]:
        """Plan `request` and create its AgenticTask (emitting `task.plan_ready`);
        (the task, the plan, True) — or (the existing task, None, False) when the
        idempotency key already made one. The task is requested by `agent:<name>` (the
        only requester admission lets an agent name) and carries the platform's
        `plan_request` id, through which the platform binds `requester` to it."""
        name = self.task_name(idempotency_key)
        if idempotency_key:
            existing = await self._own_task(name)
            if existing is not None:
                return existing, None, False
        if revises:
            previous = await self._own_task(revises)
            if previous is None:
                raise ValidationFailed(f"revises names no task of this agent: {revises}")
            feedback = feedback or rejection_feedback(previous)
        config = self.config()
        plan = await self.planner.plan(request, config, feedback=feedback)
        spec: dict[str, Any] = {
            "orgId": self.settings.org_id,
            "agentRef": {"name": self.settings.agent_name},
            "description": request[:4096],
            "requestedBy": agent_requester(self.settings.agent_name),
            "steps": plan.wire_steps(),
        }
        if conversation_id:
            spec["conversationId"] = conversation_id
        if revises:
            spec["revisionOf"] = revises
        if policy:
            spec["policy"] = policy
        AgenticTaskSpec.from_wire(spec)  # the API server would refuse what this refuses
        annotations = {
            PLANNER_ANNOTATION: plan.planner,
            MODEL_ANNOTATION: plan.model,
            MODE_ANNOTATION: plan.mode.value,
        }
        if idempotency_key:
            annotations[IDEMPOTENCY_ANNOTATION] = idempotency_key[:256]
        if plan_request:
            annotations[PLAN_REQUEST_ANNOTATION] = plan_request
        body = {
            "metadata": {
                "name": name,
                "labels": {
                    "app.kubernetes.io/managed-by": MANAGED_BY,
                    AGENT_LABEL: self.settings.agent_name,
                },
                "annotations": annotations,
            },
            "spec": spec,
        }
        try:
            task = await self.kube.create_task(body)
        except KubeConflict:
            existing = await self._own_task(name) if idempotency_key else None
            if existing is None:
                raise
            return existing, None, False
        except KubeError as exc:
            raise _kube_error(exc) from None
        await self.events.emit(
            "task.plan_ready",
            task_id=name,
            payload={
                "task": name,
                "namespace": self.settings.namespace,
                "uid": (task.get("metadata") or {}).get("uid"),
                "description": spec["description"],
                "requestedBy": requester,
                "conversationId": conversation_id,
                "revisionOf": revises,
                "planner": plan.planner,
                "model": plan.model,
                "mode": plan.mode.value,
                "summary": plan.summary,
                "warnings": list(plan.warnings),
                "steps": plan.wire_steps(),
            },
            idempotency_key=f"plan_ready:{self.settings.agent_id}:{name}",
        )
        return task, plan, True


def rejection_feedback(task: dict[str, Any]) -> str | None:
    """The expert's feedback on the rejected step of a task, if any."""
    for entry in (task.get("status") or {}).get("steps") or []:
        decision = entry.get("decision") or {}
        if decision.get("verdict") == "reject":
            return str(decision.get("feedback") or "") or None
    return None


def _kube_error(exc: KubeError) -> AgentError:
    if isinstance(exc, KubeUnreachable):
        return KubernetesUnavailable(f"the Kubernetes API is unreachable: {exc.message}")
    return KubernetesRefused(
        f"the Kubernetes API refused: {exc.message}", status=exc.status, reason=exc.reason
    )


def build_runtime(
    settings: AgentSettings,
    *,
    http: httpx.AsyncClient | None = None,
    kube: KubeClient | None = None,
    llm: LLMClient | None = None,
) -> Runtime:
    """The runtime of the settings; reads only the configuration file (which must exist)
    and the state folder; secrets and tokens are read when used."""
    holder = ConfigHolder(settings.config_file)
    client = http or httpx.AsyncClient(timeout=30.0)
    if llm is None and llm_configured(settings.llm_base_url):
        key = settings.llm_api_key.get_secret_value() if settings.llm_api_key else None
        llm = LLMClient(
            settings.llm_base_url,
            key,
            timeout=settings.llm_timeout_seconds,
            max_retries=settings.llm_max_retries,
        )
    gate = LLMGate(llm)
    events = EventSender(settings, client)
    corrections = CorrectionStore(settings.state_dir)
    runtime_ref: list[Runtime] = []

    async def audit(completion: Completion, purpose: str) -> None:
        await runtime_ref[0].audit_llm(completion, purpose)

    async def tools(tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        return await runtime_ref[0].run_tool(tool, action, params)

    async def reads(tool: str, action: str, params: dict[str, Any]) -> dict[str, Any]:
        return await runtime_ref[0].read_tool(tool, action, params)

    runtime = Runtime(
        settings=settings,
        holder=holder,
        overlay=ConfigOverlay(),
        http=client,
        kube=kube or KubeClient.from_settings(settings),
        events=events,
        platform=PlatformClient(settings, client),
        llm=llm,
        gate=gate,
        planner=Planner(gate, audit, reads),
        responder=Responder(gate, corrections, audit, tools),
        corrections=corrections,
        cancelled=CancelRegistry(settings.state_dir),
        verifier=CommandVerifier(settings),
    )
    runtime_ref.append(runtime)
    return runtime


async def _watch_config(runtime: Runtime) -> None:
    """Reload the ConfigMap's file when the kubelet updates it; tell the platform."""
    while True:
        await asyncio.sleep(runtime.settings.config_poll_seconds)
        if runtime.holder.reload():
            config = runtime.config()
            await runtime.events.emit(
                "config.applied",
                payload={
                    "configHash": config.config_hash,
                    "configMapHash": runtime.holder.current.config_hash,
                    "source": "configmap",
                    "model": config.model,
                },
            )


async def _guard(name: str, job: BackgroundJob, runtime: Runtime) -> None:
    try:
        await job(runtime)
    except asyncio.CancelledError:
        raise
    except Exception:
        LOG.exception("background job %s stopped", name)
        await runtime.events.emit("error", payload={"code": "background_job_failed", "job": name})


async def _verified_body(request: Request) -> bytes:
    """The raw body of a command, once its HMAC signature is verified."""
    runtime: Runtime = request.app.state.runtime
    return await runtime.verifier.body(request)


Signed = Annotated[bytes, Depends(_verified_body)]
"""A command's verified raw body (FastAPI dependency)."""


def create_app(
    settings: AgentSettings,
    *,
    background: Sequence[BackgroundJob] | None = None,
    runtime: Runtime | None = None,
) -> FastAPI:
    """The agent's app. Nothing starts until the app does: then the configuration
    watcher, the event outbox and every `background` job (default :data:`BACKGROUND`)
    run, each as `job(runtime)`, until the app stops."""
    rt = runtime or build_runtime(settings)
    jobs = tuple(BACKGROUND if background is None else background)

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        running = [
            asyncio.create_task(_watch_config(rt), name="config-watch"),
            asyncio.create_task(rt.events.run(settings.event_outbox_seconds), name="outbox"),
        ]
        # --- background jobs: the executor of approved steps runs here ---------------------
        for job in jobs:
            name = getattr(job, "__name__", repr(job))
            running.append(asyncio.create_task(_guard(name, job, rt), name=name))
        try:
            yield
        finally:
            for task in running:
                task.cancel()
            for task in running:
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
            with contextlib.suppress(Exception):
                await rt.events.flush()
            await rt.kube.aclose()
            if rt.llm is not None:
                await rt.llm.aclose()
            await rt.http.aclose()

    app = FastAPI(title="humanwork agent", version="0.1.0", lifespan=lifespan)
    app.state.runtime = rt
    install_error_handlers(app)

    @app.get("/v1/health")
    async def health() -> dict[str, Any]:
        """Liveness and readiness: the agent runs and has a configuration."""
        return {"status": "ok", "configHash": rt.config().config_hash}

    @app.get("/v1/status")
    async def status() -> dict[str, Any]:
        """What the agent is and does: identity, model, tasks, events and uptime."""
        config = rt.config()
        return {
            "agentId": settings.agent_id,
            "agentName": settings.agent_name,
            "orgId": settings.org_id,
            "namespace": settings.namespace,
            "model": config.model,
            "llm": {
                "mode": "online" if rt.gate.usable() is not None else "offline",
                "configured": rt.llm is not None,
                "lastError": rt.gate.last_error,
            },
            "configHash": config.config_hash,
            "configMapHash": rt.holder.current.config_hash,
            "overlay": bool(rt.overlay.values),
            "maxConcurrentTasks": config.max_concurrent_tasks,
            "tasks": {"running": dict(rt.tasks), "cancelled": sorted(rt.cancelled.entries)},
            "events": {
                "outbox": rt.events.outbox_size,
                "delivered": rt.events.delivered,
                "dropped": rt.events.dropped,
            },
            "corrections": len(rt.corrections),
            "uptimeSeconds": round(time.monotonic() - rt.started, 1),
        }

    async def gather(body: ChatRequest) -> tuple[list[dict[str, Any]], list[str]]:
        """History and knowledge for a model prompt (best effort; none offline)."""
        history = [m.model_dump() for m in body.history or []]
        context = list(body.context or [])
        if rt.gate.usable() is None:
            return history, context
        if body.history is None and body.conversation_id:
            with contextlib.suppress(PlatformError):
                history = [
                    {"role": m.get("role", "user"), "content": m.get("content", "")}
                    for m in await rt.platform.messages(body.conversation_id, attempts=1)
                ]
        if body.context is None:
            with contextlib.suppress(PlatformError):
                found = await rt.platform.context(body.message, limit=5, attempts=1)
                context = [
                    str(r.get("content") or r.get("text") or r.get("snippet") or "") for r in found
                ]
                context = [c for c in context if c]
        return history, context

    @app.post("/v1/chat")
    async def chat(raw: Signed) -> dict[str, Any]:
        """Draft a reply (UC-1): `{reply, confidence, risk_level, flag_for_review, model,
        usage, mode, responder, corrections_used, tool_calls}`."""
        body = parse(ChatRequest, raw)
        history, context = await gather(body)
        reply = await rt.responder.reply(
            body.message, rt.config(), history=history, context=context
        )
        return reply.as_dict()

    @app.post("/v1/chat/stream")
    async def chat_stream(raw: Signed) -> StreamingResponse:
        """The reply as Server-Sent Events (UC-2): `event: token` with `{"text"}` per piece
        as it is produced, then `event: done` with the whole reply (as /v1/chat answers
        it), or `event: error` with `{code, message}`."""
        body = parse(ChatRequest, raw)
        history, context = await gather(body)
        config = rt.config()

        async def events() -> AsyncIterator[bytes]:
            try:
                async for item in rt.responder.stream(
                    body.message, config, history=history, context=context
                ):
                    if isinstance(item, Reply):
                        yield _sse("done", item.as_dict())
                    else:
                        yield _sse("token", {"text": item})
            except Exception as exc:  # the stream is already open: report in it
                LOG.exception("chat stream failed")
                yield _sse("error", error_body("llm_failed", str(exc)[:500]))

        return StreamingResponse(
            events(),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    @app.post("/v1/tasks", status_code=201)
    async def create_task(raw: Signed, request: Request) -> JSONResponse:
        """Plan a request (UC-11): creates the AgenticTask in the agent's namespace (as
        the agent's own ServiceAccount) and emits `task.plan_ready`. 201 with the task's
        name and plan; 200 with the existing task when its idempotency key (the body's
        `idempotencyKey`, else the `Idempotency-Key` header, else the signature: a replay
        is the same request) already made one."""
        body = parse(TaskRequest, raw)
        task, plan, created = await rt.propose(
            body.request,
            body.requester,
            conversation_id=body.conversation_id,
            revises=body.revises,
            feedback=body.feedback,
            policy=body.policy,
            plan_request=body.plan_request,
            idempotency_key=body.idempotency_key
            or request.headers.get(signing.IDEMPOTENCY_HEADER)
            or request.headers.get(signing.SIGNATURE_HEADER),
        )
        meta = task.get("metadata") or {}
        annotations = meta.get("annotations") or {}
        answer = {
            "name": meta.get("name"),
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "created": created,
            "planner": plan.planner if plan else annotations.get(PLANNER_ANNOTATION),
            "model": plan.model if plan else annotations.get(MODEL_ANNOTATION),
            "mode": plan.mode.value if plan else annotations.get(MODE_ANNOTATION),
            "summary": plan.summary if plan else "",
            "warnings": list(plan.warnings) if plan else [],
            "steps": (task.get("spec") or {}).get("steps", []),
        }
        return JSONResponse(answer, status_code=201 if created else 200)

    @app.post("/v1/tasks/{name}/cancel", status_code=202)
    async def cancel_task(name: str, raw: Signed) -> dict[str, Any]:
        """Stop working on a task.

        The agent's identity may write only each step's `execution` (the admission
        policies; the phase, Cancelled included, is the operator's). So the cancellation
        is the agent's own: recorded in its state folder (it survives a restart), no
        further step of the task is executed, and the platform is told with an `error`
        event of code `task_cancelled`, so that it records the cancellation in the task
        through its own identity. A step already running finishes and reports how it ended.
        """
        body = parse(CancelRequest, raw)
        task = await rt._own_task(name)
        if task is None:
            raise NotFound(f"this agent has no task {name}", task=name)
        phase = (task.get("status") or {}).get("phase")
        if phase and TaskPhase(phase).terminal:
            raise TaskTerminalError(f"the task is already {phase}", task=name, phase=phase)
        already = rt.is_cancelled(name)
        if not already:
            rt.cancelled.add(name, reason=body.reason, by=body.by)
            for hook in list(rt.on_cancel):
                try:
                    await hook(name)
                except Exception:
                    LOG.exception("cancel hook failed for %s", name)
            await rt.events.emit(
                "error",
                task_id=name,
                payload={
                    "code": "task_cancelled",
                    "message": "the task was cancelled; the agent executes none of its "
                    "remaining steps",
                    "reason": body.reason,
                    "by": body.by,
                    "phase": phase,
                    "currentStep": (task.get("status") or {}).get("currentStep"),
                },
                idempotency_key=f"cancel:{settings.agent_id}:{name}",
            )
        return {"task": name, "cancelled": True, "alreadyCancelled": already, "scope": "agent"}

    @app.post("/v1/configure")
    async def configure(raw: Signed) -> dict[str, Any]:
        """Hot reload (UC-17): the given prompt, model, tools, threshold, ... override the
        ConfigMap's until `reset` or a restart; emits `config.applied` with the hash."""
        body = parse(ConfigureRequest, raw)
        changes = body.changes()
        if not changes and not body.reset:
            raise ValidationFailed("nothing to configure")
        rt.overlay.apply(changes, reset=body.reset, by=body.by)
        config = rt.config()
        await rt.events.emit(
            "config.applied",
            payload={
                "configHash": config.config_hash,
                "configMapHash": rt.holder.current.config_hash,
                "source": "configure",
                "changed": sorted(changes),
                "reset": body.reset,
                "by": body.by,
                "model": config.model,
            },
        )
        return {
            "configHash": config.config_hash,
            "config": dict(config.data),
            "overlay": rt.overlay.values,
        }

    @app.post("/v1/corrections", status_code=202)
    async def corrections(raw: Signed) -> dict[str, Any]:
        """Expert corrections (UC-21) into the local few-shot store."""
        body = parse(CorrectionsRequest, raw)
        items = [
            Correction(
                message=c.message,
                corrected=c.corrected,
                draft=c.draft,
                note=c.note,
                conversation_id=c.conversation_id,
                by=c.by,
                **({"id": c.id} if c.id else {}),
            )
            for c in body.corrections
        ]
        total = rt.corrections.add(items)
        return {"stored": len(items), "total": total, "ids": [c.id for c in items]}

    return app


def _sse(event: str, data: Any) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data, separators=(',', ':'))}\n\n".encode()
