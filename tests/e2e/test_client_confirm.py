"""The client's confirmation end to end: operator, platform API, the agent as a process and
a fake Shopify, all real processes. A client (a role holding `run.control` to ask and
`steps.confirm`) asks for the seed's reconciliation; the platform binds it and records the
confirmation the high-stakes write needs; the expert approves the read (it runs) and the
write; the write waits for the client (no Shopify write); the client confirms; the fake
Shopify sees exactly one write, only after both the approval and the confirmation."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client as kclient

from humanwork_core import taskflow
from humanwork_core.resources import AgenticTask
from humanwork_dev.fakes.catalog import PERIOD
from tests.e2e.conftest import World, _login, execution_state, step_of
from tests.e2e.test_approve_execute import FIX, phase

ROLE = "asking-client"


async def _asking_client(world: World) -> dict[str, str]:
    """A user of the org whose role asks the agent and confirms what it asked for."""
    base = world.platform.url
    current = await world.http.get(f"{base}/access-map", headers=world.admin)
    assert current.status_code == 200, current.text
    known = set(current.json()["capabilities"])  # the map as stored, in what this build knows
    roles = {
        role: [c for c in caps if c in known] for role, caps in current.json()["roles"].items()
    }
    roles[ROLE] = ["run.control", "steps.confirm", "tasks.read"]
    r = await world.http.put(f"{base}/access-map", json={"roles": roles}, headers=world.admin)
    assert r.status_code == 200, r.text
    username = f"client-{uuid.uuid4().hex[:6]}"
    password = f"pw-{username}-0123456789"
    r = await world.http.post(
        f"{base}/users",
        json={"username": username, "password": password, "role": ROLE, "org_ids": [world.org_id]},
        headers=world.admin,
    )
    assert r.status_code == 201, r.text
    return await _login(world.http, base, username, password)


def _shown_hash(world: World, name: str, step_id: str) -> str:
    raw = kclient.CustomObjectsApi(world.cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", world.namespace, "agentictasks", name
    )
    task = AgenticTask.from_wire(raw)
    step = task.step(step_id)
    assert step is not None
    return taskflow.confirmation_hash(step, task.current_status().step(step_id))


def _confirmation(task: dict[str, Any], step_id: str) -> dict[str, Any]:
    return step_of(task, step_id).get("confirmation") or {}


async def test_the_write_runs_once_only_after_approval_and_confirmation(world: World) -> None:
    client = await _asking_client(world)
    r = await world.http.post(
        f"{world.platform.url}/orgs/{world.org_id}/agents/agent/tasks",
        json={"request": f"Reconcile all Amazon orders for {PERIOD} and update inventory"},
        headers=client,
    )
    assert r.status_code in (200, 201), r.text
    name = r.json()["id"].split("/")[1]
    read, write = r.json()["steps"]
    assert write["risk"] in ("high", "critical")
    task = await world.until(name, lambda t: _confirmation(t, write["id"]).get("required"))
    assert _confirmation(task, write["id"])["state"] == "waiting"
    assert _confirmation(task, read["id"]) == {}  # a low-risk read needs none

    assert (await world.decide(name, read["id"])).status_code == 200
    await world.until(name, lambda t: execution_state(t, read["id"]) == "Succeeded")
    r = await world.resume(name, write["id"], action="edit", parameters=FIX)
    assert r.status_code == 200, r.text
    task = await world.until(
        name, lambda t: step_of(t, write["id"]).get("state") == "AwaitingClient"
    )
    assert phase(task) == "PendingApproval" and execution_state(task, write["id"]) is None
    assert world.shop.side_effects == []  # approved, not confirmed: the agent waits

    url = f"{world.platform.url}/orgs/{world.org_id}/tasks/{name}/steps/{write['id']}/confirm"
    r = await world.http.post(
        url, json={"step_hash": _shown_hash(world, name, write["id"])}, headers=world.expert
    )
    assert r.status_code == 403, r.text  # the expert cannot confirm for the client
    assert world.shop.side_effects == []
    r = await world.http.post(
        url, json={"step_hash": _shown_hash(world, name, write["id"])}, headers=client
    )
    assert r.status_code == 200, r.text
    task = await world.until(name, lambda t: phase(t) == "Completed")
    assert execution_state(task, write["id"]) == "Succeeded"
    assert len(world.shop.side_effects) == 1
