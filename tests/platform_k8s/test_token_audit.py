"""Token rotations are audit rows by token hash, never the token (issue 14, item 5): the
operator rotates an agent's token; the platform audits `agent.token_rotated` once per
token, when the agent first presents it, with its jti, the previous jti and its SHA-256."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from humanwork_core import tokens
from tests.agents import agent_token, wait_rotated
from tests.conftest import Cluster

WHOAMI = "/v1/agent-api/whoami"


async def _rows(db: AsyncEngine, ns: str) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        found = await conn.execute(
            text(
                "SELECT actor, details FROM audit_log WHERE action = 'agent.token_rotated' "
                "AND target = :target ORDER BY seq"
            ),
            {"target": f"agent:{ns}/agent"},
        )
        return [{"actor": a, "details": d} for a, d in found.all()]


async def test_each_token_is_audited_once_by_its_hash(
    client: httpx.AsyncClient, cluster: Cluster, ready_agent: tuple[str, str], db: AsyncEngine
) -> None:
    ns, _ = ready_agent
    old = agent_token(cluster, ns)
    bearer = {"Authorization": f"Bearer {old}"}
    for _ in range(3):
        assert (await client.get(WHOAMI, headers=bearer)).status_code == 200
    (first,) = await _rows(db, ns)
    old_jti = tokens.read_minted_token(old).claims.jti
    assert first["actor"] == "operator"
    assert first["details"]["jti"] == old_jti and first["details"]["previous_jti"] is None
    assert first["details"]["token_sha256"] == hashlib.sha256(old.encode()).hexdigest()

    # the operator rotates it; the new token's first request is the rotation's audit row
    asked = await client.post("/v1/agent-api/token/refresh", headers=bearer)
    assert asked.status_code == 202, asked.text
    wait_rotated(cluster, ns, old_jti, timeout=20)
    new = agent_token(cluster, ns)
    assert new != old
    for token in (new, old, new):  # the old one is still in its grace: no row of its own
        got = await client.get(WHOAMI, headers={"Authorization": f"Bearer {token}"})
        assert got.status_code == 200, got.text
    rows = await _rows(db, ns)
    assert len(rows) == 2
    second = rows[1]["details"]
    assert second["jti"] == tokens.read_minted_token(new).claims.jti
    assert second["previous_jti"] == old_jti
    assert second["token_sha256"] == hashlib.sha256(new.encode()).hexdigest()
    assert old not in json.dumps(rows) and new not in json.dumps(rows)
