"""The live event stream from the attacker's side: a user deactivated, or removed from
its org, while it holds an open stream loses the stream (on this replica at once, on
another at its next look), while another member's stream stays open beside it."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.settings import Settings
from tests.platform.conftest import TwoOrgs, make_settings
from tests.platform.stream_support import (
    WITHIN,
    Stream,
    served,  # noqa: F401 (a fixture)
)


@pytest.fixture
def settings(database_url: str) -> Settings:
    return make_settings(database_url, notify_interval_seconds=0.5, events_heartbeat_seconds=0.5)


async def test_a_deactivated_users_open_stream_ends(
    served: str,  # noqa: F811 (the fixture)
    client: httpx.AsyncClient,
    two_orgs: TwoOrgs,
) -> None:
    victim = await Stream(served, two_orgs.viewer_a).open()
    other = await Stream(served, two_orgs.expert_a).open()
    try:
        await victim.beats_after(0)  # open and alive before the change
        r = await client.post("/users/viewer-a/deactivate", headers=two_orgs.admin_a.headers)
        assert r.status_code == 200, r.text
        ended = await asyncio.wait_for(victim.task, WITHIN)
        assert ended.endswith(": access ended\n\n"), ended
        # positive control: the other member's stream stays open and beating
        await other.beats_after(len(other.text))
    finally:
        await victim.close()
        await other.close()


async def test_a_removed_members_stream_ends_when_another_replica_removes_it(
    served: str,  # noqa: F811 (the fixture)
    two_orgs: TwoOrgs,
    db: AsyncEngine,
) -> None:
    victim = await Stream(served, two_orgs.viewer_a).open()
    other = await Stream(served, two_orgs.expert_a).open()
    try:
        # another replica's removal: no wake-up here, only the stream's next look
        async with db.begin() as conn:
            await conn.execute(
                text(
                    "DELETE FROM memberships WHERE user_id = "
                    "(SELECT id FROM users WHERE username = 'viewer-a')"
                )
            )
        ended = await asyncio.wait_for(victim.task, WITHIN)
        assert ended.endswith(": access ended\n\n"), ended
        await other.beats_after(len(other.text))
    finally:
        await victim.close()
        await other.close()
