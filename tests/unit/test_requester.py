"""The requester the platform vouches for (humanwork_core.requester): pure rules."""

from __future__ import annotations

from humanwork_core.requester import (
    PLAN_REQUEST_ANNOTATION,
    REQUESTER_ANNOTATION,
    agent_requester,
    may_bind,
    plan_request_id,
    requester_of,
)
from humanwork_core.resources import AgenticTask
from tests.unit.factories import make_task


def agent_task(**annotations: str) -> AgenticTask:
    task = make_task()
    spec = task.spec.model_copy(update={"requested_by": "agent:acme-ecommerce"})
    meta = task.metadata.model_copy(update={"annotations": dict(annotations)})
    return task.model_copy(update={"spec": spec, "metadata": meta})


def test_an_agents_task_is_requested_by_the_agent_until_the_platform_vouches() -> None:
    assert agent_requester("acme-ecommerce") == "agent:acme-ecommerce"
    assert requester_of(agent_task()) == "agent:acme-ecommerce"
    vouched = agent_task(**{REQUESTER_ANNOTATION: "alice"})
    assert requester_of(vouched) == "alice"
    assert requester_of(make_task()) == "ops@acme.example"  # created by the platform


def test_the_platform_binds_only_the_request_it_sent_to_that_agents_own_task() -> None:
    task = agent_task(**{PLAN_REQUEST_ANNOTATION: "r1"})
    assert may_bind(task, "acme-ecommerce", "r1")
    assert not may_bind(task, "acme-ecommerce", "r2")  # another request's task
    assert not may_bind(task, "acme-support", "r1")  # another agent's request
    assert not may_bind(agent_task(), "acme-ecommerce", "r1")  # no request id on it
    bound = agent_task(**{PLAN_REQUEST_ANNOTATION: "r1", REQUESTER_ANNOTATION: "bob"})
    assert not may_bind(bound, "acme-ecommerce", "r1")  # the first binding stands
    human = make_task()
    human.metadata.annotations[PLAN_REQUEST_ANNOTATION] = "r1"
    assert not may_bind(human, "acme-ecommerce", "r1")  # not created by the agent


def test_a_retried_request_keeps_its_id_and_distinct_requests_do_not_share_one() -> None:
    first = plan_request_id("org", "agent", "alice", "key-1")
    assert first == plan_request_id("org", "agent", "alice", "key-1")
    assert first != plan_request_id("org", "agent", "bob", "key-1")
    assert first != plan_request_id("org", "other", "alice", "key-1")
    assert plan_request_id("org", "agent", "alice", None) != plan_request_id(
        "org", "agent", "alice", None
    )
