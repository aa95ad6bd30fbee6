"""The admission policies on the one way out of a terminal phase (issue 15, item 9): a task
that failed on a step's tool call goes back to InProgress only when the platform API has
recorded an expert's retry of that failed attempt. The operator cannot reopen it alone, the
agent cannot write the retry, and a retry recorded for an earlier attempt reopens nothing.
Run on the real kube-apiserver with the real writers' identities."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from humanwork_dev.processes import OperatorProcess
from tests.conftest import Cluster
from tests.integration.contract_support import (
    AGENT,
    OPERATOR,
    PLATFORM,
    Contract,
    agent_start,
    api_error,
    installed_contract,
    new_task,
    now,
    operator_tick,
    platform_decide,
)

TERMINAL = "the task is Failed, a terminal phase, which never changes"


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


def failed_task(contract: Contract) -> str:
    """A task whose first step (a read) failed, and which the operator marked Failed."""
    name = new_task(contract, "retry")
    operator_tick(contract, name)
    platform_decide(contract, name, "fetch-orders")
    agent_start(contract, name, "fetch-orders")
    task = AgenticTask.from_wire(contract.admin.get(name))
    status = taskflow.finish_execution(task, "fetch-orders", now(), error="upstream_error: 503")
    contract.as_(AGENT).apply_status(name, taskflow.owned_status(status, taskflow.Writer.AGENT))
    assert operator_tick(contract, name)["status"]["phase"] == "Failed"
    return name


def retry_status(contract: Contract, name: str) -> dict[str, object]:
    task = AgenticTask.from_wire(contract.admin.get(name))
    status = taskflow.retry(task, "fetch-orders", by="bob@acme.example", note=None, now=now())
    return taskflow.owned_status(status, taskflow.Writer.PLATFORM_API)


def test_the_operator_cannot_reopen_a_failed_task_without_a_retry(contract: Contract) -> None:
    name = failed_task(contract)
    with pytest.raises(client.ApiException) as refused:
        contract.as_(OPERATOR).merge_status(name, {"phase": "InProgress"})
    assert TERMINAL in api_error(refused.value)[1]
    assert contract.admin.get(name)["status"]["phase"] == "Failed"


def test_the_agent_cannot_write_the_retry_that_would_reopen_its_task(contract: Contract) -> None:
    name = failed_task(contract)
    with pytest.raises(client.ApiException) as refused:
        contract.as_(AGENT).apply_status(name, retry_status(contract, name))
    assert (
        "step resolutions may be written only by the platform API" in (api_error(refused.value)[1])
    )
    assert "resolution" not in contract.admin.get(name)["status"]["steps"][0]


def test_the_platforms_retry_lets_the_operator_reopen_the_task_once(contract: Contract) -> None:
    name = failed_task(contract)
    contract.as_(PLATFORM).apply_status(name, retry_status(contract, name))
    reopened = operator_tick(contract, name)
    assert reopened["status"]["phase"] == "InProgress"
    assert "completedAt" not in reopened["status"]
    # the agent runs attempt 2, which fails again: the old retry reopens nothing
    agent_start(contract, name, "fetch-orders")
    task = AgenticTask.from_wire(contract.admin.get(name))
    status = taskflow.finish_execution(task, "fetch-orders", now(), error="upstream_error: 503")
    contract.as_(AGENT).apply_status(name, taskflow.owned_status(status, taskflow.Writer.AGENT))
    assert operator_tick(contract, name)["status"]["phase"] == "Failed"
    with pytest.raises(client.ApiException) as refused:
        contract.as_(OPERATOR).merge_status(name, {"phase": "InProgress"})
    assert TERMINAL in api_error(refused.value)[1]
