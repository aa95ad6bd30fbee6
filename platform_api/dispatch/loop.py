"""The dispatcher: the background loop every platform replica runs. Every
`dispatch_interval_seconds` it looks for client messages not dispatched yet (or whose
claim's holder died), claims up to `dispatch_batch` of them (`claims.claim`: one replica
wins each) and dispatches the ones it won concurrently (`service.Dispatch`)."""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.dispatch import claims
from platform_api.dispatch.agents import AgentPort
from platform_api.dispatch.service import Dispatch, new_holder
from platform_api.settings import Settings

log = logging.getLogger(__name__)


class Dispatcher:
    """One replica's dispatcher. `agents` is the port to the org's agents (replaceable)."""

    def __init__(
        self,
        sessions: async_sessionmaker[AsyncSession],
        settings: Settings,
        agents: AgentPort,
        holder: str | None = None,
    ) -> None:
        self.sessions = sessions
        self.settings = settings
        self.agents = agents
        self.holder = holder or new_holder()
        self.paused = False
        """A paused dispatcher claims nothing (what it holds, it finishes)."""

    async def run(self) -> None:
        """Dispatch what is due, then look again after the interval (until cancelled)."""
        while True:
            try:
                while not self.paused and await self.run_once():
                    pass
            except Exception as exc:  # the database failed: look again later
                log.warning("dispatch: %s", exc)
            await asyncio.sleep(self.settings.dispatch_interval_seconds)

    async def run_once(self) -> int:
        """Claim what is due and dispatch it; how many messages this dispatcher claimed."""
        async with self.sessions() as session:
            found = await claims.due(session, self.settings.dispatch_batch)
        won = []
        for item in found:
            got = await claims.claim(
                self.sessions, item, self.holder, self.settings.dispatch_lease_seconds
            )
            if got is not None:
                won.append(got)
        if won:
            dispatch = Dispatch(
                self.sessions, self.agents, self.holder, self.settings.dispatch_timeout_seconds
            )
            await asyncio.gather(*(dispatch.run(c) for c in won))
        return len(won)
