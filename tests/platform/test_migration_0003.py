"""Migration 0003 (issue 12, item 5): the tool proxy's ledger and the agent events are
keyed per agent. Rows written under the old keys survive the upgrade, and afterwards two
agents of one org can hold the same key without meeting."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import text

from humanwork_dev.postgres import PostgresServer
from platform_api.db import make_engine, migrate

NOW = datetime(2026, 11, 30, tzinfo=UTC)


async def test_existing_rows_survive_and_keys_become_per_agent(postgres: PostgresServer) -> None:
    name = f"m0003_{uuid.uuid4().hex}"
    engine = make_engine(await postgres.create_database(name))
    org = uuid.uuid4()
    try:
        await migrate(engine, "0002")
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "INSERT INTO orgs (id, slug, name, namespace, created_at) "
                    "VALUES (:id, 'acme', 'Acme', 'org-acme', :at)"
                ),
                {"id": org, "at": NOW},
            )
            await conn.execute(
                text(
                    "INSERT INTO tool_calls (org_id, idempotency_key, agent_id, tool, action, "
                    "request_hash, state, status_code, result, created_at) VALUES (:org, 'k', "
                    "'org-acme/a', 'shopify', 'listProducts', 'h', 'done', 200, '{}', :at)"
                ),
                {"org": org, "at": NOW},
            )
            await conn.execute(
                text(
                    "INSERT INTO agent_events (org_id, idempotency_key, agent_id, event_type, "
                    "occurred_at, payload, received_at) VALUES (:org, 'e', 'org-acme/a', "
                    "'error', :at, '{}', :at)"
                ),
                {"org": org, "at": NOW},
            )
        await migrate(engine)
        async with engine.begin() as conn:
            kept = (await conn.execute(text("SELECT agent_id, state FROM tool_calls"))).all()
            assert kept == [("org-acme/a", "done")]
            events = (await conn.execute(text("SELECT agent_id FROM agent_events"))).all()
            assert events == [("org-acme/a",)]
            # agent b may now use the keys agent a used
            await conn.execute(
                text(
                    "INSERT INTO tool_calls (org_id, idempotency_key, agent_id, tool, action, "
                    "request_hash, state, status_code, result, created_at) VALUES (:org, 'k', "
                    "'org-acme/b', 'shopify', 'listProducts', 'h', 'done', 200, '{}', :at)"
                ),
                {"org": org, "at": NOW},
            )
            await conn.execute(
                text(
                    "INSERT INTO agent_events (org_id, idempotency_key, agent_id, event_type, "
                    "occurred_at, payload, received_at) VALUES (:org, 'e', 'org-acme/b', "
                    "'error', :at, '{}', :at)"
                ),
                {"org": org, "at": NOW},
            )
            count = (await conn.execute(text("SELECT count(*) FROM tool_calls"))).scalar()
            assert count == 2
    finally:
        await engine.dispose()
        await postgres.drop_database(name)
