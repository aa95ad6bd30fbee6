"""One set of rules for decisions (issue 15, item 7), from the attacker's side.

Seed 001: resume requires `run.control`. A user whose role holds every other capability
but `access.manage` (including the `tasks.decide` an older access map may still give) is
refused on every path that decides a step: approve and reject on the step endpoints (the
workspace's row and detail buttons, `kubectl humanwork approve|reject`), resume, bulk
resume (`kubectl humanwork bulk`), resolving an unknown outcome, reopening an expired
decision; nothing is written, and
it cannot grant itself `run.control`. A user whose role holds `run.control` decides.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.settings import Settings
from tests.platform.conftest import Api, make_settings
from tests.platform_k8s.conftest import Orgs, TaskApi, ticked

ALMOST = [
    "tasks.read",
    "tasks.decide",
    "tools.manage",
    "agents.manage",
    "audit.read",
    "orgs.manage",
    "users.manage",
    "policy.manage",
]
"""Every capability but `run.control` (and `access.manage`, which could grant it)."""


@pytest.fixture
def settings(database_url: str, platform_kubeconfig: Path) -> Settings:
    # a deployment's own access map, as HUMANWORK_ACCESS_MAP sets it
    return make_settings(
        database_url,
        kubeconfig=str(platform_kubeconfig),
        upstream_allowed_endpoints=["127.0.0.1/32"],
        access_map={"reviewer": ALMOST},
    )


def _decision_paths(task_id: str, step: str) -> list[tuple[str, dict[str, Any]]]:
    ns, name = task_id.split("/")
    return [
        (f"/agentic/tasks/{task_id}/steps/{step}/approve", {}),
        (f"/agentic/tasks/{task_id}/steps/{step}/reject", {"feedback": "no"}),
        (f"/human-tasks/{ns}/{name}/{step}/resume", {"action": "approve"}),
        (f"/human-tasks/{ns}/{name}/{step}/resume", {"action": "reject", "feedback": "no"}),
        ("/human-tasks/bulk-resume", {"ids": [f"{task_id}/{step}"], "action": "approve"}),
        (f"/human-tasks/{ns}/{name}/{step}/resolve", {"outcome": "applied"}),
        (f"/human-tasks/{ns}/{name}/{step}/reopen", {}),
    ]


async def test_every_way_of_deciding_needs_run_control(
    client: httpx.AsyncClient, api: Api, orgs: Orgs, tasks: TaskApi, db: AsyncEngine
) -> None:
    root = await api.admin()
    reviewer = await api.user(root, f"reviewer-{uuid.uuid4().hex[:6]}", "reviewer", [orgs.org_a])
    me = await client.get("/users/me", headers=reviewer.headers)
    assert "run.control" not in me.json()["capabilities"], me.text
    made = await tasks.create(orgs.requester, orgs.org_a)
    await tasks.until(orgs.expert, made["id"], ticked)

    for path, body in _decision_paths(made["id"], "read"):
        r = await client.post(path, json=body, headers=reviewer.headers)
        assert r.status_code == 403, (path, r.text)
        assert r.json()["code"] == "forbidden" and r.json()["details"] == {
            "capability": "run.control"
        }, (path, r.text)
    # nor can it give itself the capability
    r = await client.put(
        "/access-map",
        json={"roles": {"reviewer": [*ALMOST, "run.control"]}},
        headers=reviewer.headers,
    )
    assert r.status_code == 403, r.text

    task = (await tasks.get(orgs.expert, made["id"])).json()
    assert all(not s.get("decision") for s in task["status"].get("steps") or []), task
    async with db.connect() as conn:
        denied = await conn.execute(
            text("SELECT count(*) FROM audit_log WHERE action = 'access.denied' AND actor = :a"),
            {"a": reviewer.username},
        )
        assert denied.scalar_one() == len(_decision_paths(made["id"], "read")) + 1

    # the same paths answer a holder of run.control
    r = await tasks.decide(orgs.expert, made["id"], "read")
    assert r.status_code == 200, r.text
