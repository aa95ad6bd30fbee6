"""The deactivation guard as the app wires it: only the routes that can need it carry it
(decided once, as the app is built), and on those it reads no org of its own: the
caller's query, which carries each membership's org state, serves the guard and the
route's own caller check alike (one query per request), fresh on every request."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.db import ENGINE
from platform_api.deactivation.guard import GUARD, _routes
from tests.platform.conftest import TwoOrgs

CALLER_QUERY = "memberships.user_id = users.id"
"""A fragment of the caller's query (`floor.accounts.principal_of`) and of no other."""


@contextmanager
def statements(app: FastAPI) -> Iterator[list[str]]:
    """The SQL statements the app runs meanwhile (`autocommit:` before those run outside
    a transaction)."""
    seen: list[str] = []

    def record(conn: Any, _cursor: Any, statement: str, *_: Any) -> None:
        level = conn.get_execution_options().get("isolation_level")
        seen.append(("autocommit:" if level == "AUTOCOMMIT" else "") + statement)

    engine = ENGINE.of(app.state).sync_engine
    event.listen(engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", record)


def _guarded(app: FastAPI) -> dict[tuple[str, str], bool]:
    return {
        (method, path): any(d is GUARD for d in route.dependencies)
        for path, route in _routes(app.router.routes)
        for method in route.methods
    }


def test_only_the_routes_that_can_need_it_carry_the_guard(app: FastAPI) -> None:
    guarded = _guarded(app)
    assert guarded[("PUT", "/orgs/{org_id}/tool-permissions/{tool_name}")]
    assert guarded[("POST", "/agentic/tasks/{namespace}/{name}/cancel")]
    # reads, paths naming no org, the lifecycle and routes checking themselves: none
    assert not guarded[("GET", "/users/me")]
    assert not guarded[("GET", "/orgs/{org_id}/tool-permissions")]
    assert not guarded[("POST", "/orgs")]
    assert not guarded[("POST", "/orgs/{org_id}/deactivate")]
    assert not guarded[("POST", "/agentic/tasks/{namespace}/{name}/steps/{step_id}/approve")]


async def test_a_guarded_change_reads_its_caller_once_and_no_org(
    app: FastAPI, client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    url = f"/orgs/{two_orgs.org_a}/tool-permissions/shopify"
    with statements(app) as seen:
        r = await client.put(url, json={"enabled": True}, headers=two_orgs.admin_a.headers)
    assert r.status_code == 200, r.text
    assert sum(CALLER_QUERY in s for s in seen) == 1, seen
    # read on a connection given back at once (no BEGIN, not held through the route)
    assert next(s for s in seen if CALLER_QUERY in s).startswith("autocommit:")
    assert not [s for s in seen if "deactivated_at IS NOT NULL" in s], seen


async def _deactivated(db: AsyncEngine, org_id: str, deactivated: bool) -> None:
    """Set the org's state in the database (the deactivation's teardown needs Kubernetes;
    the guard reads the state only)."""
    async with db.begin() as conn:
        await conn.execute(
            text("UPDATE orgs SET deactivated_at = :at WHERE id = :id"),
            {"at": datetime.now(UTC) if deactivated else None, "id": org_id},
        )


async def test_a_members_change_to_a_deactivated_org_is_refused_and_others_answered(
    db: AsyncEngine, client: httpx.AsyncClient, two_orgs: TwoOrgs
) -> None:
    a, url = two_orgs.org_a, f"/orgs/{two_orgs.org_a}/tool-permissions/shopify"
    body = {"enabled": True}
    assert (await client.put(url, json=body, headers=two_orgs.admin_a.headers)).status_code == 200
    await _deactivated(db, a, True)
    refused = await client.put(url, json=body, headers=two_orgs.admin_a.headers)
    assert refused.status_code == 409
    assert refused.json()["code"] == "org_deactivated"
    # a member without the capability: the guard answers first, as before
    viewer = await client.put(url, json=body, headers=two_orgs.viewer_a.headers)
    assert (viewer.status_code, viewer.json()["code"]) == (409, "org_deactivated")
    # another org's admin and nobody: the route's own answers (nothing leaks)
    other = await client.put(url, json=body, headers=two_orgs.admin_b.headers)
    assert other.status_code == 404
    anonymous = await client.put(url, json=body)
    assert anonymous.status_code == 401
    # a read stays open; reactivated, the change passes on the very next request
    assert (await client.get(f"/orgs/{a}", headers=two_orgs.admin_a.headers)).status_code == 200
    await _deactivated(db, a, False)
    again = await client.put(url, json=body, headers=two_orgs.admin_a.headers)
    assert again.status_code == 200, again.text
