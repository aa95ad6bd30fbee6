"""The operator's Events of a task's wait for its initiating client, on the real control
plane with the operator running: `WaitingForClient` (naming the step) once when the step
starts to wait, however often the task is reconciled meanwhile (an expert's approval is one
more pass), then `ClientConfirmed` or `ClientDeclined` once when the client answered. The
platform's writes (the confirmation required, the decision, the client's answer) are made
as the platform API's ServiceAccount, as the platform makes them."""

from __future__ import annotations

from collections import Counter

import pytest
from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask, Verdict
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess
from tests.conftest import Cluster
from tests.integration.test_tasks import (
    Writer,
    approve,
    create_task,
    now,
    read_task,
    task_manifest,
    wait_task,
)
from tests.support import eventually

CLIENT = "carol@acme.example"
REASON = "not before the stock count, call me on +1 415 555 0100"


def event_counts(cluster: Cluster, ns: str, name: str) -> Counter[str]:
    """How often each reason was posted about the task (an Event's `count` included)."""
    listed = client.CoreV1Api(cluster.api).list_namespaced_event(
        ns, field_selector=f"involvedObject.kind=AgenticTask,involvedObject.name={name}"
    )
    counts: Counter[str] = Counter()
    for event in listed.items:
        counts[event.reason] += event.count or 1
    return counts


def waiting_task(cluster: Cluster, ns: str, org_id: str, platform: Writer) -> AgenticTask:
    """A one-step plan whose step (high risk) the platform recorded as needing the
    client's confirmation; the operator saw it wait."""
    body = task_manifest(ns, org_id)
    body["spec"]["steps"] = body["spec"]["steps"][1:]
    name = create_task(cluster, body)
    task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
    platform.apply(task, taskflow.require_confirmation(task, ["write"]))

    def waiting(t: AgenticTask) -> bool:
        return any(
            c.type == "WaitingForClient" and c.status == "True"
            for c in t.current_status().conditions
        )

    return wait_task(cluster, ns, name, waiting)


@pytest.mark.parametrize("answer", ["confirm", "decline"])
def test_the_wait_for_the_client_is_announced_once_and_so_is_its_end(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str], answer: str
) -> None:
    ns, org_id = org
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    task = waiting_task(cluster, ns, org_id, platform)
    name = task.metadata.name
    counts = eventually(lambda: (c := event_counts(cluster, ns, name))["WaitingForClient"] and c)
    assert counts["WaitingForClient"] == 1
    [message] = [
        e.message
        for e in client.CoreV1Api(cluster.api)
        .list_namespaced_event(ns, field_selector=f"involvedObject.name={name}")
        .items
        if e.reason == "WaitingForClient"
    ]
    assert "write" in message and "Update inventory of 14 SKUs" in message

    # the expert approves: another pass of the operator, the step still waits
    approve(platform, task, "write", Verdict.APPROVE)
    task = wait_task(cluster, ns, name, lambda t: t.current_status().step("write").decision)
    step = task.step("write")
    assert step is not None
    if answer == "confirm":
        digest = taskflow.confirmation_hash(step, task.current_status().step("write"))
        status = taskflow.confirm(task, "write", by=CLIENT, step_hash=digest, now=now())
        wanted = "ClientConfirmed"
    else:
        status = taskflow.decline(task, "write", by=CLIENT, reason=REASON, now=now())
        wanted = "ClientDeclined"
    platform.apply(read_task(cluster, ns, name), status)

    # the answer's Event is posted by a pass after the approval's: once it is there, every
    # earlier pass has posted what it would
    counts = eventually(lambda: (c := event_counts(cluster, ns, name))[wanted] and c)
    assert counts["WaitingForClient"] == 1 and counts[wanted] == 1
    other = "ClientDeclined" if wanted == "ClientConfirmed" else "ClientConfirmed"
    assert counts[other] == 0
    if answer == "decline":
        # the task halts like on a rejection; the client's words are not in any Event
        eventually(lambda: event_counts(cluster, ns, name)["TaskRejected"])
        listed = client.CoreV1Api(cluster.api).list_namespaced_event(ns).items
        assert all("415" not in (e.message or "") for e in listed)
    assert event_counts(cluster, ns, name)[wanted] == 1
