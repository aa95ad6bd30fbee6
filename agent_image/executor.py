"""The agent's task loop: watch its AgenticTasks and execute each approved step, once.

The loop lists the agent's tasks, then watches them (relisting when the watch expires).
Whenever a task changes, `taskflow.executable_step` says whether a step may run now (it
is approved, every earlier step executed, it has not finished). Running a step:

1. record `execution: Running` (attempt n) in the task's status with the agent's own
   field manager (`taskflow.start_execution`; the admission policies let only this
   agent's identity write executions), and emit `task.step_started`;
2. run it: an action step calls the platform's tool proxy with the step's (possibly
   expert-edited) parameters and the idempotency key `<task uid>/<step id>`; an input
   step takes the value the expert provided or selected;
3. record `Succeeded` with a short result summary, or `Failed` with the error
   (`taskflow.finish_execution`), and emit `task.step_completed` / `task.step_failed`,
   then `task.completed` after the last step.

Outcome unknown: when the proxy answers `tool_call_outcome_unknown` (the upstream may or
may not have applied the call: a timeout, a connection broken after sending, a 5xx to a
write), the step is recorded `OutcomeUnknown` and `task.step_outcome_unknown` is emitted;
the agent never calls again on its own. The same holds for a claim another call held past
its lease (a platform that died mid-call: `claims`). Once an expert resolves it (the platform writes
`resolution` for that attempt), the step is executable again: the next attempt's call is
answered by the proxy's ledger (the replayed result after `applied`) or goes upstream once
more (after `not_applied`).

Exactly once: before calling the proxy the agent writes a local checkpoint
(`state_dir/checkpoints`), and after the call the result. A restarted agent finds the
step still `Running`, skips the call when the checkpoint holds the result, and otherwise
calls again with the SAME idempotency key, which the proxy answers with the first call's
result without touching the upstream again. Rejections, expiry and cancellation need
nothing here: the task is terminal and no step is executable.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from agent_image.claims import IN_PROGRESS_CODE, ClaimWatch
from humanwork_core import catalog, taskflow, tracing
from humanwork_core.resources import AgenticTask
from humanwork_core.resources.agentictask import Step, StepKind
from humanwork_core.resources.common import API_VERSION
from humanwork_core.resources.names import AGENT_FIELD_MANAGER

LOG = logging.getLogger("humanwork.agent.executor")

SUMMARY_MAX_CHARS = 2000
RETRY_SECONDS = 1.0
MAX_CALL_ATTEMPTS = 30
GROUP_VERSION = API_VERSION


# --- what the executor needs from the rest of the agent (kube.py, platform.py, events.py) --


class TaskStore(Protocol):
    """The agent's view of its AgenticTasks through the Kubernetes API."""

    async def list_tasks(
        self, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]: ...

    def watch_tasks(self, resource_version: str) -> AsyncIterator[tuple[str, dict[str, Any]]]: ...

    async def get_task(self, name: str) -> dict[str, Any] | None: ...

    async def apply_task_status(
        self, name: str, patch: dict[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]: ...


class ToolRunner(Protocol):
    """The platform's tool proxy."""

    async def call_tool(
        self,
        tool: str,
        action: str,
        params: dict[str, Any],
        idempotency_key: str,
        task: str | None,
        step: str | None,
    ) -> dict[str, Any]: ...


class Emitter(Protocol):
    """The signed event channel to the platform."""

    async def emit(
        self,
        event_type: str,
        *,
        task_id: str | None = None,
        step_id: str | None = None,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> None: ...


class StepFailed(Exception):
    """The step ran and failed for good (the proxy refused it or the upstream did): `code`
    is the proxy's stable error code and `details` what it said of the upstream."""

    def __init__(
        self, message: str, *, code: str = "step_failed", details: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details = dict(details or {})


class OutcomeUnknown(Exception):
    """The proxy says the step's side effect may or may not have happened: an expert
    must resolve it; never retried automatically."""


OUTCOME_UNKNOWN_CODE = "tool_call_outcome_unknown"
MALFORMED_CODE = "malformed_answer"
TRANSIENT_CODES = frozenset(
    {
        "platform_unreachable",
        "token_unavailable",
        "unavailable",
        "kubernetes_unavailable",
        "kubernetes_error",
        "database_unavailable",
    }
)
"""Answers that say nothing about the step (the platform is busy or away): the call is sent
again with the same key, as after the upstream's 429 (`transient`), up to
`MAX_CALL_ATTEMPTS` times. `tool_call_in_progress` (another call holds the step's claim) is
waited out for as long as the claim's lease lasts (`claims.ClaimWatch`), uncounted.
Every other refusal, the upstream's included, fails the step with its reason; an expert may
retry it (`retry_safe`)."""


def failure(exc: Exception) -> StepFailed:
    """The step's failure from the proxy's refusal: its code, message and what it said of
    the upstream (`upstreamStatus`, `outcome`, `replayed`)."""
    code = str(getattr(exc, "code", "") or "tool_call_failed")
    message = str(getattr(exc, "message", "") or exc)
    raw = getattr(exc, "details", None)
    details = {k: v for k, v in (raw or {}).items() if isinstance(v, str | int | bool)}
    upstream = details.get("upstreamStatus")
    where = f" (upstream answered {upstream})" if upstream else ""
    return StepFailed(f"{code}{where}: {message}", code=code, details=details)


# --- checkpoints ---------------------------------------------------------------------------


class Checkpoints:
    """One small JSON file per step key, written atomically (temp file, fsync, rename)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder

    def _path(self, key: str) -> Path:
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"

    def read(self, key: str) -> dict[str, Any] | None:
        try:
            loaded: dict[str, Any] = json.loads(self._path(key).read_text())
        except (OSError, ValueError):
            return None
        return loaded if loaded.get("key") == key else None

    def write(self, key: str, **data: Any) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        target = self._path(key)
        temp = target.with_suffix(".tmp")
        with temp.open("w") as handle:
            json.dump({"key": key, **data}, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, target)


def summarise(result: dict[str, Any]) -> dict[str, Any]:
    """A result small enough for the task's status: lists become their length (plus the
    first item when it is small), and the whole is cut to `SUMMARY_MAX_CHARS`."""
    summary: dict[str, Any] = {}
    for key, value in result.items():
        if isinstance(value, list):
            summary[f"{key}Count"] = len(value)
        elif isinstance(value, dict):
            summary[key] = summarise(value) if len(json.dumps(value)) > 200 else value
        else:
            summary[key] = value
    text = json.dumps(summary, default=str)
    if len(text) > SUMMARY_MAX_CHARS:
        return {"truncated": True, "keys": sorted(result)[:50]}
    return summary


def step_key(task: AgenticTask, step_id: str) -> str:
    """The idempotency key of a step's side effect: stable across restarts and retries."""
    return f"{task.metadata.uid or task.metadata.name}/{step_id}"


# --- the executor --------------------------------------------------------------------------


class Executor:
    """Runs the approved steps of the AgenticTasks whose agentRef is this agent."""

    def __init__(
        self,
        agent_name: str,
        namespace: str,
        tasks: TaskStore,
        tools: ToolRunner,
        events: Emitter,
        checkpoints: Checkpoints,
        *,
        max_concurrent: int = 3,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        is_cancelled: Callable[[str], bool] = lambda _: False,
        track: Callable[..., None] = lambda _name, **_info: None,
        untrack: Callable[[str], None] = lambda _name: None,
        retry_seconds: float = RETRY_SECONDS,
        on_step: Callable[[str | None, str], None] = lambda _tool, _outcome: None,
        on_loop: Callable[[str | None], None] = lambda _error: None,
    ) -> None:
        self.agent_name = agent_name
        self.namespace = namespace
        self.tasks = tasks
        self.tools = tools
        self.events = events
        self.checkpoints = checkpoints
        self.clock = clock
        self._slots = asyncio.Semaphore(max_concurrent)
        self._running: dict[str, asyncio.Task[None]] = {}
        self._dirty: set[str] = set()
        self._announced: set[str] = set()
        self.is_cancelled = is_cancelled
        """Tasks cancelled through the agent's own API are never executed further."""
        self.track = track
        self.untrack = untrack
        self.retry_seconds = retry_seconds
        """The pause before a transient answer's call is sent again (same key)."""
        self.on_step, self.on_loop = on_step, on_loop
        """The metrics: each execution's (tool, outcome); each round (None) or error."""

    @property
    def running(self) -> list[str]:
        """Names of the tasks being worked on now."""
        return sorted(self._running)

    # the loop -------------------------------------------------------------------------

    async def run(self) -> None:
        """List, then watch, forever; every error is logged and the loop starts again."""
        while True:
            try:
                items, version = await self.tasks.list_tasks()
                for item in items:
                    self.notice(item)
                async for kind, obj in self.tasks.watch_tasks(version):
                    if kind in ("ADDED", "MODIFIED"):
                        self.notice(obj)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the watch expired (410) or the API blinked: relist
                LOG.info("task watch ended (%s); relisting", exc)
                self.on_loop("watch")
                await asyncio.sleep(RETRY_SECONDS)

    def notice(self, raw: dict[str, Any]) -> None:
        """React to the latest state of a task: start a worker for it unless one runs (then
        it looks again when it is done)."""
        spec = raw.get("spec") or {}
        name = str(raw.get("metadata", {}).get("name", ""))
        if (spec.get("agentRef") or {}).get("name") != self.agent_name or not name:
            return
        if self.is_cancelled(name):
            return
        if name in self._running:
            self._dirty.add(name)
            return
        try:
            task = AgenticTask.from_wire(raw)
        except ValueError as exc:
            LOG.warning("task %s unreadable: %s", name, exc)
            return
        if taskflow.executable_step(task) is None:
            self._announce_input(task)
            return
        self._running[name] = asyncio.create_task(self._work(name, raw), name=f"task {name}")

    async def _work(self, name: str, seen: dict[str, Any] | None = None) -> None:
        try:
            async with self._slots:
                while True:
                    self.on_loop(None)
                    self._dirty.discard(name)
                    # the first round works from the object the watch just delivered (no
                    # extra round trip before the step starts); later rounds read afresh
                    raw, seen = seen or await self.tasks.get_task(name), None
                    if raw is None or self.is_cancelled(name):
                        return
                    task = AgenticTask.from_wire(raw)
                    step = taskflow.executable_step(task)
                    if step is None:
                        if name not in self._dirty:
                            return
                        continue
                    with tracing.execute_tool(task, step.id, step.tool, step_key(task, step.id)):
                        await self.execute(task, step)
        except asyncio.CancelledError:
            raise
        except Exception:
            LOG.exception("task %s: the step could not be run; retrying on the next change", name)
            self.on_loop("task")
            await asyncio.sleep(RETRY_SECONDS)
            self._dirty.add(name)
        finally:
            self._running.pop(name, None)
            self.untrack(name)
            if name in self._dirty:
                self._dirty.discard(name)
                raw = await _quiet(self.tasks.get_task(name))
                if raw is not None:
                    self.notice(raw)

    def _announce_input(self, task: AgenticTask) -> None:
        """Emit `task.needs_input` once when the task waits on an input step."""
        step = taskflow.decidable_step(task)
        if step is None or step.kind is not StepKind.INPUT:
            return
        key = f"{step_key(task, step.id)}/needs_input"
        if key in self._announced:
            return
        self._announced.add(key)
        payload: dict[str, Any] = {"description": step.description}
        if step.options:
            payload["options"] = list(step.options)
        asyncio.get_running_loop().create_task(
            self.events.emit(
                "task.needs_input",
                task_id=task.metadata.name,
                step_id=step.id,
                payload=payload,
                idempotency_key=key,
            )
        )

    # one step ---------------------------------------------------------------------------

    async def _apply(self, task: AgenticTask, status: Any) -> AgenticTask:
        body = {
            "apiVersion": GROUP_VERSION,
            "kind": "AgenticTask",
            "metadata": {"name": task.metadata.name, "namespace": self.namespace},
            "status": taskflow.owned_status(status, taskflow.Writer.AGENT),
        }
        applied = await self.tasks.apply_task_status(
            task.metadata.name, body, field_manager=AGENT_FIELD_MANAGER
        )
        return AgenticTask.from_wire(applied)

    async def execute(self, task: AgenticTask, step: Step) -> None:
        """Run one approved step of `task`, recording and announcing each move."""
        name = task.metadata.name
        key = step_key(task, step.id)
        task = await self._apply(task, taskflow.start_execution(task, step.id, self.clock()))
        entry = task.current_status().step(step.id)
        attempt = entry.execution.attempt if entry.execution else 1
        self.track(name, step=step.id, attempt=attempt, state="Running")
        await self.events.emit(
            "task.step_started",
            task_id=name,
            step_id=step.id,
            payload={"attempt": attempt, "tool": step.tool, "description": step.description},
            idempotency_key=f"{key}/started/{attempt}",
        )
        try:
            result = await self._run_step(task, step, key)
        except OutcomeUnknown as exc:
            self.on_step(step.tool, "unknown")
            await self._unknown(name, step.id, str(exc)[:4000], key, attempt)
            return
        except StepFailed as exc:
            self.on_step(step.tool, "failed")
            await self._failed(task, step, exc, key, attempt)
            return
        self.on_step(step.tool, "succeeded")
        summary = summarise(result)
        fresh = AgenticTask.from_wire(await self._must_get(name))
        done = await self._apply(
            fresh, taskflow.finish_execution(fresh, step.id, self.clock(), result=summary)
        )
        await self.events.emit(
            "task.step_completed",
            task_id=name,
            step_id=step.id,
            payload={"result": summary, "attempt": attempt},
            idempotency_key=f"{key}/completed",
        )
        status = done.current_status()
        if all(taskflow.is_executed(status.step(s.id)) for s in done.spec.steps):
            await self.events.emit(
                "task.completed",
                task_id=name,
                payload={"steps": len(done.spec.steps)},
                idempotency_key=f"{done.metadata.uid or name}/completed",
            )

    async def _failed(
        self, task: AgenticTask, step: Step, exc: StepFailed, key: str, attempt: int
    ) -> None:
        """Record (and announce) that the step failed, with the reason and whether an
        expert may retry it (the catalog's `retry_safe`)."""
        name = task.metadata.name
        error = str(exc)[:4000]
        fresh = AgenticTask.from_wire(await self._must_get(name))
        await self._apply(
            fresh, taskflow.finish_execution(fresh, step.id, self.clock(), error=error)
        )
        self.track(name, step=step.id, attempt=attempt, state="Failed")
        action = taskflow.effective_parameters(step, task.current_status().step(step.id))
        payload: dict[str, Any] = {
            "error": error,
            "code": exc.code,
            "attempt": attempt,
            "tool": step.tool,
            "action": action.get("action"),
            "retrySafe": catalog.retry_safe(step.tool, action.get("action")),
        }
        payload.update(
            {k: exc.details[k] for k in ("upstreamStatus", "outcome") if k in exc.details}
        )
        await self.events.emit(
            "task.step_failed",
            task_id=name,
            step_id=step.id,
            payload=payload,
            idempotency_key=f"{key}/failed/{attempt}",
        )

    async def _unknown(self, name: str, step_id: str, error: str, key: str, attempt: int) -> None:
        """Record (and announce) that the step waits for an expert's resolution."""
        fresh = AgenticTask.from_wire(await self._must_get(name))
        await self._apply(
            fresh,
            taskflow.finish_execution(fresh, step_id, self.clock(), error=error, unknown=True),
        )
        self.track(name, step=step_id, attempt=attempt, state="OutcomeUnknown")
        await self.events.emit(
            "task.step_outcome_unknown",
            task_id=name,
            step_id=step_id,
            payload={"error": error, "attempt": attempt},
            idempotency_key=f"{key}/unknown/{attempt}",
        )

    async def _must_get(self, name: str) -> dict[str, Any]:
        raw = await self.tasks.get_task(name)
        if raw is None:
            raise LookupError(f"task {name} disappeared")
        return raw

    async def _run_step(self, task: AgenticTask, step: Step, key: str) -> dict[str, Any]:
        saved = self.checkpoints.read(key)
        if saved is not None and saved.get("state") == "done":
            LOG.info("step %s: result found in the checkpoint; not calling again", key)
            result: dict[str, Any] = saved.get("result") or {}
            return result
        entry = task.current_status().step(step.id)
        if step.kind is StepKind.INPUT:
            decision = entry.decision
            value: dict[str, Any] = {}
            if decision is not None and decision.input is not None:
                value = {"input": dict(decision.input)}
            elif decision is not None and decision.selection is not None:
                value = {"selection": decision.selection}
            self.checkpoints.write(key, state="done", result=value)
            return value
        parameters = taskflow.effective_parameters(step, entry)
        action = str(parameters.get("action", ""))
        params = parameters.get("params") or {}
        if not action or not isinstance(params, dict) or step.tool is None:
            raise StepFailed("the step's parameters name no action and params")
        self.checkpoints.write(key, state="calling")
        result = await self._call(step.tool, action, dict(params), key, task.metadata.name, step.id)
        self.checkpoints.write(key, state="done", result=result)
        return result

    async def _call(
        self, tool: str, action: str, params: dict[str, Any], key: str, task: str, step: str
    ) -> dict[str, Any]:
        """Call the proxy until it gives an answer: a result, or a final refusal. Only the
        platform's own transient answers (`TRANSIENT_CODES`) are sent again, with the same
        key, and a claim held by another call is waited out while its lease lasts (then
        it is an unknown outcome: `claims`); an unknown outcome is never called again;
        every other refusal fails the step with its reason; an answer that is not
        `{result: {...}}` fails it as malformed."""
        last: StepFailed | None = None
        claim, tries = ClaimWatch(), 0
        while tries < MAX_CALL_ATTEMPTS:
            try:
                answer = await self.tools.call_tool(tool, action, params, key, task, step)
            except Exception as exc:
                code = getattr(exc, "code", None)
                if code == OUTCOME_UNKNOWN_CODE or (
                    code == IN_PROGRESS_CODE and claim.given_up(exc)
                ):
                    self.checkpoints.write(key, state="unknown")
                    raise OutcomeUnknown(f"{OUTCOME_UNKNOWN_CODE}: {exc}") from exc
                last, tries = failure(exc), tries + (code != IN_PROGRESS_CODE)
                if code != IN_PROGRESS_CODE and not transient(exc):
                    raise last from exc
                LOG.info("step %s: proxy answered %s; retrying with the same key", key, code)
                await asyncio.sleep(self.retry_seconds)
                continue
            return _result(answer)
        raise StepFailed(
            f"the tool proxy gave no answer after {MAX_CALL_ATTEMPTS} calls: {last}",
            code=last.code if last is not None else "tool_call_failed",
            details=last.details if last is not None else None,
        )


def transient(exc: Exception) -> bool:
    """Whether a refused call may be sent again with the same key: the platform away or
    busy (`TRANSIENT_CODES`, a connection error), or the upstream's 429 (it did nothing, and
    the proxy released the step's claim: the call waits and goes again, it never fails the
    step)."""
    code = getattr(exc, "code", None)
    details = getattr(exc, "details", None) or {}
    rate_limited = code == "upstream_error" and details.get("upstreamAnswered") == "429"
    return code in TRANSIENT_CODES or isinstance(exc, OSError) or rate_limited


def _result(answer: object) -> dict[str, Any]:
    """The result of the proxy's answer `{tool, action, result: {...}, ...}`, or
    StepFailed(`malformed_answer`)."""
    result = answer.get("result") if isinstance(answer, dict) else None
    if not isinstance(result, dict):
        shape = type(answer).__name__ if not isinstance(answer, dict) else sorted(answer)[:10]
        raise StepFailed(
            f"{MALFORMED_CODE}: the tool proxy answered without a result object ({shape})",
            code=MALFORMED_CODE,
        )
    return dict(result)


async def _quiet(awaitable: Any) -> Any:
    with contextlib.suppress(Exception):
        return await awaitable
    return None


class AgentRuntime(Protocol):
    """What `run_executor` needs of the agent's runtime (agent_image.app.Runtime)."""

    @property
    def settings(self) -> Any: ...
    @property
    def kube(self) -> Any: ...
    @property
    def platform(self) -> Any: ...
    @property
    def events(self) -> Any: ...
    @property
    def metrics(self) -> Any: ...

    def state_dir(self) -> Path: ...
    def is_cancelled(self, name: str) -> bool: ...
    def track_task(self, name: str, **info: Any) -> None: ...
    def untrack_task(self, name: str) -> None: ...
    def config(self) -> Any: ...


async def run_executor(runtime: AgentRuntime) -> None:
    """The agent's background job: execute approved steps for as long as the agent runs."""
    executor = Executor(
        runtime.settings.agent_name,
        runtime.settings.namespace,
        runtime.kube,
        runtime.platform,
        runtime.events,
        Checkpoints(runtime.state_dir() / "checkpoints"),
        max_concurrent=int(runtime.config().max_concurrent_tasks),
        is_cancelled=runtime.is_cancelled,
        track=runtime.track_task,
        untrack=runtime.untrack_task,
        on_step=runtime.metrics.executed,
        on_loop=runtime.metrics.looped,
    )
    await executor.run()
