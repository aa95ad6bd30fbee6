"""The admission policies on the initiating client's confirmation of a step: only the
platform API writes it (the agent, the operator or another identity of the namespace
cannot confirm for the client, nor remove or waive a required confirmation), a step that
needs it has no execution before it is confirmed, and a decline stays a decline. Run on the
real kube-apiserver with the real writers' identities; each refusal beside the platform's
own write of the same thing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from humanwork_dev.processes import OperatorProcess
from tests.conftest import Cluster
from tests.integration.contract_support import (
    ADMIN,
    AGENT,
    INTRUDER,
    OPERATOR,
    PLATFORM,
    Contract,
    api_error,
    execution,
    installed_contract,
    new_task,
    now,
    operator_tick,
    platform_decide,
    status_steps,
)

WRITE = "update-inventory"
CLIENT = "carol@acme.example"
ONLY_PLATFORM = "step confirmations may be written only by the platform API"


@pytest.fixture(scope="module", autouse=True)
def without_the_operator() -> Iterator[None]:
    """Status is written by hand as each writer: pause any operator the session started."""
    paused = OperatorProcess.running()
    for process in paused:
        process.stop()
    yield
    for process in paused:
        process.start()


@pytest.fixture(scope="module")
def contract(cluster: Cluster) -> Iterator[Contract]:
    yield from installed_contract(cluster)


def _task(contract: Contract, name: str) -> AgenticTask:
    return AgenticTask.from_wire(contract.admin.get(name))


def _platform(contract: Contract, name: str, status: Any) -> dict[str, Any]:
    body = taskflow.owned_status(status, taskflow.Writer.PLATFORM_API)
    return contract.as_(PLATFORM).apply_status(name, body)


def waiting_task(contract: Contract) -> str:
    """The read approved and run, the write approved; the platform recorded that the
    write needs the client's confirmation."""
    name = new_task(contract, "confirm")
    operator_tick(contract, name)
    _platform(contract, name, taskflow.require_confirmation(_task(contract, name), [WRITE]))
    return name


def confirmed_status(contract: Contract, name: str) -> dict[str, Any]:
    task = _task(contract, name)
    step = task.step(WRITE)
    assert step is not None
    digest = taskflow.confirmation_hash(step, task.current_status().step(WRITE))
    status = taskflow.confirm(task, WRITE, by=CLIENT, step_hash=digest, now=now())
    return taskflow.owned_status(status, taskflow.Writer.PLATFORM_API)


def confirmation_of(contract: Contract, name: str) -> dict[str, Any] | None:
    for entry in status_steps(contract.admin.get(name)):
        if entry["id"] == WRITE:
            return entry.get("confirmation")
    return None


@pytest.mark.parametrize("writer", [AGENT, OPERATOR, INTRUDER])
def test_nobody_but_the_platform_confirms_for_the_client(contract: Contract, writer: str) -> None:
    name = waiting_task(contract)
    body = confirmed_status(contract, name)
    with pytest.raises(client.ApiException) as refused:
        contract.as_(writer).apply_status(name, body, force=True)
    status, message = api_error(refused.value)
    assert status in (403, 422)
    assert ONLY_PLATFORM in message or "may be written only by" in message
    assert confirmation_of(contract, name) == {"required": True, "state": "waiting"}
    # positive control: the platform writes the very same body
    contract.as_(PLATFORM).apply_status(name, body)
    written = confirmation_of(contract, name)
    assert written is not None and written["state"] == "confirmed" and written["by"] == CLIENT


def test_the_agent_cannot_remove_or_waive_a_required_confirmation(contract: Contract) -> None:
    name = waiting_task(contract)
    steps = status_steps(contract.admin.get(name))
    for entry in steps:
        entry.pop("confirmation", None)
    with pytest.raises(client.ApiException) as refused:
        contract.as_(AGENT).merge_status(name, {"steps": steps})
    message = api_error(refused.value)[1]  # both policies refuse; the API server names one
    assert ONLY_PLATFORM in message or "a required confirmation cannot be removed" in message
    waived = status_steps(contract.admin.get(name))
    for entry in waived:
        if entry["id"] == WRITE:
            entry["confirmation"] = {"required": False, "state": "waiting"}
    with pytest.raises(client.ApiException) as refused:
        contract.as_(ADMIN).merge_status(name, {"steps": waived})  # not even a cluster admin
    assert "a required confirmation cannot be removed or waived" in api_error(refused.value)[1]
    assert confirmation_of(contract, name) == {"required": True, "state": "waiting"}


def test_no_execution_of_an_unconfirmed_step_even_when_approved(contract: Contract) -> None:
    name = waiting_task(contract)
    platform_decide(contract, name, "fetch-orders")
    run = {"id": "fetch-orders", "execution": execution("Succeeded")}
    run["execution"]["finishedAt"] = run["execution"]["startedAt"]
    contract.as_(AGENT).apply_status(name, {"steps": [run]})
    operator_tick(contract, name)
    platform_decide(contract, name, WRITE)
    write = {"id": WRITE, "execution": execution()}
    with pytest.raises(client.ApiException) as refused:
        contract.as_(AGENT).apply_status(name, {"steps": [run, write]})
    assert "can have an execution only once confirmed" in api_error(refused.value)[1]
    contract.as_(PLATFORM).apply_status(name, confirmed_status(contract, name))
    contract.as_(AGENT).apply_status(name, {"steps": [run, write]})  # positive control
    entry = next(e for e in status_steps(contract.admin.get(name)) if e["id"] == WRITE)
    assert entry["execution"]["state"] == "Running"


def test_a_decline_stays_a_decline(contract: Contract) -> None:
    name = waiting_task(contract)
    declined = taskflow.decline(_task(contract, name), WRITE, by=CLIENT, reason="no", now=now())
    _platform(contract, name, declined)
    with pytest.raises(client.ApiException) as refused:
        contract.as_(PLATFORM).apply_status(name, confirmed_status_unchecked(contract, name))
    assert "a declined step stays declined" in api_error(refused.value)[1]
    record = confirmation_of(contract, name)
    assert record is not None and record["state"] == "declined" and record["reason"] == "no"


def confirmed_status_unchecked(contract: Contract, name: str) -> dict[str, Any]:
    """A confirmation written over a decline (the rules refuse it; admission must too)."""
    task = _task(contract, name)
    step = task.step(WRITE)
    assert step is not None
    entry = task.current_status().step(WRITE)
    return {
        "steps": [
            {
                "id": WRITE,
                "confirmation": {
                    "required": True,
                    "state": "confirmed",
                    "by": CLIENT,
                    "at": now().isoformat().replace("+00:00", "Z"),
                    "stepHash": taskflow.confirmation_hash(step, entry),
                },
            }
        ]
    }
