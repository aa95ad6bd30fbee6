"""An agent acts only as itself (issue 12, item 3), from the attacker's side.

A compromised agent holds its ServiceAccount token. These tests use real TokenRequest tokens
of the agent's ServiceAccount (and of a stranger's, and of the platform's) against the real
API server, with test grants at least as broad as the agent's Role: whatever is refused here
is refused by the admission policy manifests/base/policies/agent-task-identity.yaml alone.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from humanwork_dev.processes import OperatorProcess
from tests.conftest import Cluster
from tests.integration.contract_support import (
    AGENT,
    AGENT_NAME,
    INTRUDER,
    OTHER_AGENT,
    OTHER_AGENT_NAME,
    PLATFORM,
    Contract,
    api_error,
    delete_namespaces,
    installed_contract,
    org_namespace_labels,
    task_body,
)
from tests.support import eventually

REQUESTER_ANNOTATION = "humanwork.io/requester"


@pytest.fixture(scope="module", autouse=True)
def without_the_operator() -> Iterator[None]:
    """The operator would tick these tasks; nothing here needs it."""
    paused = OperatorProcess.running()
    for process in paused:
        process.stop()
    yield
    for process in paused:
        process.start()


@pytest.fixture(scope="module")
def contract(cluster: Cluster) -> Iterator[Contract]:
    yield from installed_contract(cluster)


def _body(contract: Contract, **spec: Any) -> dict[str, Any]:
    body = task_body(f"id-{uuid.uuid4().hex[:8]}", contract.namespace, contract.org_id)
    body["spec"].update(spec)
    return body


def _refused(contract: Contract, actor: str, body: dict[str, Any]) -> str:
    """Create `body` as `actor`, expect a 403 from admission; returns its message."""
    with pytest.raises(client.ApiException) as caught:
        contract.as_(actor).create(copy.deepcopy(body))
    status, message = api_error(caught.value)
    assert status == 403, message
    assert "denied request" in message or "ValidatingAdmissionPolicy" in message, message
    with pytest.raises(client.ApiException) as missing:
        contract.admin.get(body["metadata"]["name"], body["metadata"]["namespace"])
    assert missing.value.status == 404  # nothing was created
    return message


def test_an_agent_creates_tasks_for_itself_requested_by_itself(contract: Contract) -> None:
    body = _body(contract)
    created = contract.as_(AGENT).create(body)
    assert created["spec"]["agentRef"]["name"] == AGENT_NAME
    assert created["spec"]["requestedBy"] == f"agent:{AGENT_NAME}"


def test_an_agent_cannot_create_a_task_for_another_agent(contract: Contract) -> None:
    # acme-support's identity names acme-ecommerce, and the other way round
    message = _refused(contract, OTHER_AGENT, _body(contract))
    assert "may write only tasks for its own AgentInstance" in message
    other = _body(
        contract, agentRef={"name": OTHER_AGENT_NAME}, requestedBy=f"agent:{OTHER_AGENT_NAME}"
    )
    assert "its own AgentInstance" in _refused(contract, AGENT, other)


def test_a_service_account_that_is_no_agent_cannot_create_tasks(contract: Contract) -> None:
    message = _refused(contract, INTRUDER, _body(contract))
    assert "may write only tasks for its own AgentInstance" in message


def test_an_agent_cannot_create_a_task_in_another_org(contract: Contract) -> None:
    # the test grant reaches every namespace (broader than the agent's own Role): only the
    # policy stands between the agent and another org's namespace
    core = client.CoreV1Api(contract.cluster.api)
    other_org = str(uuid.uuid4())
    namespace = f"identity-{uuid.uuid4().hex[:8]}"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(name=namespace, labels=org_namespace_labels(other_org))
        )
    )
    try:
        body = task_body(f"id-{uuid.uuid4().hex[:8]}", namespace, other_org)
        assert "its own AgentInstance" in _refused(contract, AGENT, body)
    finally:
        delete_namespaces(core, [namespace])


@pytest.mark.parametrize(
    "requested_by",
    ["alice@acme.example", "agent:acme-support", "ops-lead", f"agent:{AGENT_NAME} "],
)
def test_an_agent_cannot_name_a_requester(contract: Contract, requested_by: str) -> None:
    # naming the real requester's colleague would block them from approving; naming someone
    # else would let the real requester approve their own plan
    message = _refused(contract, AGENT, _body(contract, requestedBy=requested_by))
    assert f"must have spec.requestedBy agent:{AGENT_NAME}" in message


def test_only_the_platform_vouches_for_a_requester(contract: Contract) -> None:
    forged = _body(contract)
    forged["metadata"]["annotations"] = {REQUESTER_ANNOTATION: "alice@acme.example"}
    message = _refused(contract, AGENT, forged)
    assert "humanwork.io/requester may be set only by the platform API" in message

    body = _body(contract)
    name = body["metadata"]["name"]
    contract.as_(AGENT).create(body)
    vouched = {"metadata": {"annotations": {REQUESTER_ANNOTATION: "alice@acme.example"}}}
    for actor in (AGENT, INTRUDER):  # (the intruder is refused for being no agent of it)
        with pytest.raises(client.ApiException) as caught:
            contract.as_(actor).merge(name, vouched)
        assert caught.value.status == 403
    with pytest.raises(client.ApiException) as caught:
        contract.as_(AGENT).merge(name, vouched)
    assert "only by the platform API" in api_error(caught.value)[1]
    contract.as_(PLATFORM).merge(name, vouched)
    task = contract.admin.get(name)
    assert task["metadata"]["annotations"][REQUESTER_ANNOTATION] == "alice@acme.example"
    # once vouched for, nobody but the platform changes or removes it
    for patch in (
        {"metadata": {"annotations": {REQUESTER_ANNOTATION: "mallory@acme.example"}}},
        {"metadata": {"annotations": {REQUESTER_ANNOTATION: None}}},
    ):
        with pytest.raises(client.ApiException) as caught:
            contract.as_(AGENT).merge(name, patch)
        assert caught.value.status == 403
    eventually(
        lambda: (
            contract.admin.get(name)["metadata"]["annotations"][REQUESTER_ANNOTATION]
            == "alice@acme.example"
        ),
        timeout=5,
    )
