"""The agent's executor when a step's tool call fails (issue 15, item 9): the upstream
refuses (4xx) or fails (5xx), its answer is lost (unknown outcome), the proxy refuses, the
proxy's answer is malformed. Each ends the step as it should, with the reason, the event
and the right number of calls; only the platform's own transient answers are sent again.

The executor runs with the agent's real platform client (its HTTP transport answers as the
proxy does), a task store that keeps the task as the API server would (each writer's part
merged by step id) and the agent's checkpoints on disk.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agent_image.executor import Checkpoints, Executor
from agent_image.platform import PlatformClient
from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from tests.unit.factories import T0, make_task, with_status
from tests.unit.test_agent_events import agent_settings
from tests.unit.test_step_retry import ADJUST, READ
from tests.unit.test_step_retry import SET as WRITE
from tests.unit.test_taskflow import approve


class Store:
    """One AgenticTask as the API server keeps it: each apply merges the writer's fields
    into the step entries of the same id."""

    def __init__(self, task: AgenticTask) -> None:
        self.raw = task.to_wire()
        self.raw["metadata"]["uid"] = "uid-1"

    async def list_tasks(
        self, label_selector: str | None = None
    ) -> tuple[list[dict[str, Any]], str]:
        return [self.raw], "1"

    async def watch_tasks(self, resource_version: str) -> AsyncIterator[tuple[str, Any]]:
        if False:
            yield "", {}

    async def get_task(self, name: str) -> dict[str, Any] | None:
        return json.loads(json.dumps(self.raw))

    async def apply_task_status(
        self, name: str, patch: dict[str, Any], field_manager: str, force: bool = True
    ) -> dict[str, Any]:
        status = self.raw.setdefault("status", {})
        steps = {s["id"]: s for s in status.get("steps", [])}
        for part in patch["status"].get("steps", []):
            steps.setdefault(part["id"], {"id": part["id"]}).update(part)
        status["steps"] = list(steps.values())
        return await self.get_task(name)  # type: ignore[return-value]

    def task(self) -> AgenticTask:
        return AgenticTask.from_wire(self.raw)


class Events:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    async def emit(
        self,
        event_type: str,
        *,
        task_id: str | None = None,
        step_id: str | None = None,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> None:
        self.sent.append({"type": event_type, "step": step_id, "key": idempotency_key, **payload})

    def of(self, event_type: str) -> list[dict[str, Any]]:
        return [e for e in self.sent if e["type"] == event_type]


class Proxy:
    """Answers the agent's tool calls as the platform's proxy would, in order."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def handler(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if self.answers else ok()
        if isinstance(answer, Exception):
            raise answer
        return answer

    def keys(self) -> set[str]:
        return {json.loads(r.content)["idempotencyKey"] for r in self.requests}


def ok(result: dict[str, Any] | None = None) -> httpx.Response:
    body = {"tool": "shopify", "action": "x", "result": result or {"order": {"id": 7}}}
    return httpx.Response(200, json={**body, "replayed": False, "sideEffecting": False})


def refusal(status: int, code: str, message: str, **details: str) -> httpx.Response:
    return httpx.Response(status, json={"code": code, "message": message, "details": details})


def approved(step: Any) -> Store:
    return Store(approve(make_task(step), step.id))


async def run(tmp_path: Path, store: Store, proxy: Proxy) -> Events:
    settings = agent_settings(tmp_path, "http://platform.test")
    http = httpx.AsyncClient(transport=httpx.MockTransport(proxy.handler))
    platform = PlatformClient(settings, http, attempts=3, backoff=0.0)
    events = Events()
    executor = Executor(
        "acme-ecommerce",
        "org-acme",
        store,
        platform,
        events,
        Checkpoints(tmp_path / "checkpoints"),
        clock=lambda: T0,
        retry_seconds=0.0,
    )
    task = store.task()
    step = taskflow.executable_step(task)
    assert step is not None
    await executor.execute(task, step)
    await http.aclose()
    return events


def execution(store: Store, step_id: str) -> Any:
    entry = store.task().current_status().step(step_id).execution
    assert entry is not None
    return entry


async def test_an_upstream_4xx_fails_the_step_with_the_upstreams_reason(tmp_path: Path) -> None:
    store, proxy = (
        approved(READ),
        Proxy(
            refusal(502, "upstream_error", "Shopify answered 404 Not Found", upstreamStatus="404")
        ),
    )
    events = await run(tmp_path, store, proxy)
    run_ = execution(store, "look")
    assert run_.state.value == "Failed"
    assert run_.error == ("upstream_error (upstream answered 404): Shopify answered 404 Not Found")
    assert len(proxy.requests) == 1  # the upstream's answer is final
    [failed] = events.of("task.step_failed")
    assert failed["code"] == "upstream_error" and failed["upstreamStatus"] == "404"
    assert failed["retrySafe"] is True and failed["attempt"] == 1
    assert failed["key"] == "uid-1/look/failed/1"
    assert events.of("task.step_completed") == []
    # the task fails with its step
    after = with_status(store.task(), taskflow.tick(store.task(), T0))
    assert after.current_status().phase is not None
    assert after.current_status().phase.value == "Failed"


async def test_an_upstream_5xx_to_a_read_fails_at_once_not_after_blind_resends(
    tmp_path: Path,
) -> None:
    store = approved(READ)
    proxy = Proxy(
        refusal(502, "upstream_error", "Shopify answered 500", upstreamStatus="500"),
        ok(),  # a blind resend would have succeeded and hidden the failure
    )
    events = await run(tmp_path, store, proxy)
    assert execution(store, "look").state.value == "Failed"
    assert "upstream answered 500" in execution(store, "look").error
    assert len(proxy.requests) == 1
    assert events.of("task.step_failed")[0]["upstreamStatus"] == "500"


async def test_a_refused_write_fails_and_says_it_is_not_safe_to_retry(tmp_path: Path) -> None:
    store = approved(ADJUST)
    proxy = Proxy(
        refusal(
            502,
            "upstream_error",
            "Shopify answered 422: not stocked",
            upstreamStatus="422",
            outcome="refused",
        )
    )
    events = await run(tmp_path, store, proxy)
    assert execution(store, "adjust").state.value == "Failed"
    [failed] = events.of("task.step_failed")
    assert failed["retrySafe"] is False and failed["outcome"] == "refused"
    assert failed["action"] == "adjustInventoryLevel"


async def test_an_unknown_outcome_waits_for_an_expert_and_is_never_called_again(
    tmp_path: Path,
) -> None:
    store = approved(WRITE)
    proxy = Proxy(
        refusal(409, "tool_call_outcome_unknown", "the upstream timed out after sending"),
        ok(),
    )
    events = await run(tmp_path, store, proxy)
    assert execution(store, "set").state.value == "OutcomeUnknown"
    assert len(proxy.requests) == 1
    assert events.of("task.step_failed") == []
    [unknown] = events.of("task.step_outcome_unknown")
    assert "tool_call_outcome_unknown" in unknown["error"]
    with pytest.raises(taskflow.NotFailed):  # an expert resolves it; no retry
        taskflow.retry(store.task(), "set", by="bob", note=None, now=T0)


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (403, "step_not_approved"),
        (403, "tool_not_permitted"),
        (409, "integration_missing"),
        (422, "invalid_params"),
        (429, "tool_rate_limited"),
    ],
)
async def test_a_proxy_refusal_fails_the_step_with_its_code(
    tmp_path: Path, status: int, code: str
) -> None:
    store, proxy = approved(READ), Proxy(refusal(status, code, f"refused: {code}"), ok())
    events = await run(tmp_path, store, proxy)
    assert execution(store, "look").state.value == "Failed"
    assert execution(store, "look").error == f"{code}: refused: {code}"
    assert len(proxy.requests) == 1
    assert events.of("task.step_failed")[0]["code"] == code


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, content=b"<html>proxy error</html>"),
        httpx.Response(200, json={"tool": "shopify", "action": "getOrder"}),
        httpx.Response(200, json={"tool": "shopify", "result": ["not", "an", "object"]}),
        httpx.Response(200, json=["not an object"]),
    ],
    ids=["not-json", "no-result", "result-not-object", "not-object"],
)
async def test_a_malformed_answer_fails_the_step_as_malformed(
    tmp_path: Path, answer: httpx.Response
) -> None:
    store, proxy = approved(READ), Proxy(answer, ok())
    events = await run(tmp_path, store, proxy)
    assert execution(store, "look").state.value == "Failed"
    assert execution(store, "look").error.startswith("malformed_answer")
    assert len(proxy.requests) == 1
    assert events.of("task.step_failed")[0]["code"] == "malformed_answer"


async def test_a_lost_platform_is_called_again_with_the_same_key_and_the_step_completes(
    tmp_path: Path,
) -> None:
    store = approved(WRITE)
    proxy = Proxy(
        httpx.ReadTimeout("the platform did not answer"),
        refusal(503, "unavailable", "starting"),
        refusal(409, "tool_call_in_progress", "a call with this key is running"),
        ok({"inventory_level": {"available": 3}}),
    )
    events = await run(tmp_path, store, proxy)
    assert execution(store, "set").state.value == "Succeeded"
    assert len(proxy.requests) == 4
    assert proxy.keys() == {"uid-1/set"}  # one key: the proxy's ledger keeps it once
    assert events.of("task.step_failed") == []
    assert len(events.of("task.step_completed")) == 1


async def test_a_platform_that_never_answers_fails_the_step_with_the_last_reason(
    tmp_path: Path,
) -> None:
    store = approved(READ)
    proxy = Proxy(*[refusal(503, "unavailable", "the tool proxy is not running")] * 200)
    events = await run(tmp_path, store, proxy)
    run_ = execution(store, "look")
    assert run_.state.value == "Failed"
    assert "the tool proxy is not running" in run_.error
    assert events.of("task.step_failed")[0]["code"] == "unavailable"


async def test_a_retried_step_runs_once_more_and_a_second_failure_is_announced_again(
    tmp_path: Path,
) -> None:
    store = approved(READ)
    fail = refusal(502, "upstream_error", "Shopify answered 503", upstreamStatus="503")
    events = await run(tmp_path, store, Proxy(fail))
    task = with_status(store.task(), taskflow.tick(store.task(), T0))
    task = with_status(task, taskflow.retry(task, "look", by="bob", note=None, now=T0))
    task = with_status(task, taskflow.tick(task, T0))
    store.raw = {**task.to_wire(), "metadata": store.raw["metadata"]}
    again = await run(tmp_path, store, Proxy(fail))
    assert execution(store, "look").attempt == 2
    assert [e["key"] for e in events.of("task.step_failed") + again.of("task.step_failed")] == [
        "uid-1/look/failed/1",
        "uid-1/look/failed/2",
    ]
    last = await run(tmp_path, reopen(store), Proxy(ok()))
    assert execution(store, "look").state.value == "Succeeded"
    assert len(last.of("task.completed")) == 1


def reopen(store: Store) -> Store:
    task = with_status(store.task(), taskflow.tick(store.task(), T0))
    task = with_status(task, taskflow.retry(task, "look", by="bob", note=None, now=T0))
    task = with_status(task, taskflow.tick(task, T0))
    store.raw = {**task.to_wire(), "metadata": store.raw["metadata"]}
    return store


async def test_an_upstream_429_to_a_write_is_waited_out_with_the_same_key(tmp_path: Path) -> None:
    """The upstream rate-limited the write (it did nothing; the proxy released the step's
    claim): the agent calls again with the same key instead of failing the step."""
    store = approved(WRITE)
    proxy = Proxy(
        refusal(429, "upstream_error", "shopify answered 429", upstreamAnswered="429"),
        ok({"inventory_level": {"available": 5}}),
    )
    events = await run(tmp_path, store, proxy)
    assert execution(store, "set").state.value == "Succeeded"
    assert len(proxy.requests) == 2
    assert proxy.requests[0].content == proxy.requests[1].content  # the same call, its key
    assert events.of("task.step_failed") == []


def in_progress(stale_in: int = 300) -> httpx.Response:
    """The proxy's answer while another call holds the step's claim (a platform that died
    mid-call leaves it `started` until its lease runs out)."""
    return refusal(
        409,
        "tool_call_in_progress",
        "a call with this key is running",
        staleInSeconds=str(stale_in),
    )


async def test_a_claim_held_longer_than_thirty_tries_is_waited_out_not_failed(
    tmp_path: Path,
) -> None:
    """A claim left `started` by a platform that died answers `tool_call_in_progress` until
    its lease runs out: the agent keeps asking with the same key (never failing the step on
    it) and the step ends as the ledger then says, here outcome unknown for an expert."""
    store = approved(WRITE)
    unknown = refusal(409, "tool_call_outcome_unknown", "an expert must resolve it")
    proxy = Proxy(*[in_progress(300 - n) for n in range(45)], unknown)
    events = await run(tmp_path, store, proxy)
    assert execution(store, "set").state.value == "OutcomeUnknown"
    assert len(proxy.requests) == 46  # past MAX_CALL_ATTEMPTS, all with the one key
    assert proxy.keys() == {"uid-1/set"}
    assert events.of("task.step_failed") == []
    assert len(events.of("task.step_outcome_unknown")) == 1


async def test_a_claim_still_held_after_its_lease_is_an_unknown_outcome_never_a_failure(
    tmp_path: Path,
) -> None:
    """The platform's lease has run out (it says 0 s left) and it still answers `in
    progress` (a clock skew, a platform too old to turn the claim): whether a call with this
    key reached the upstream is unknown, so the step waits for an expert, never Failed."""
    store = approved(WRITE)
    proxy = Proxy(*[in_progress(0)] * 400)
    events = await run(tmp_path, store, proxy)
    assert execution(store, "set").state.value == "OutcomeUnknown"
    assert events.of("task.step_failed") == []
    assert events.of("task.step_outcome_unknown")[0]["error"].startswith(
        "tool_call_outcome_unknown"
    )
    assert proxy.keys() == {"uid-1/set"}


async def test_a_database_that_blinked_is_called_again_with_the_same_key(tmp_path: Path) -> None:
    """The platform's database restarted mid-call (503 `database_unavailable`): that says
    nothing about the step, so the agent calls again with its key; the step never fails."""
    store = approved(WRITE)
    down = refusal(503, "database_unavailable", "the platform's database did not answer")
    proxy = Proxy(*[down] * 5, ok({"inventory_level": {"available": 4}}))
    events = await run(tmp_path, store, proxy)
    assert execution(store, "set").state.value == "Succeeded"
    assert len(proxy.requests) == 6 and proxy.keys() == {"uid-1/set"}
    assert events.of("task.step_failed") == []
