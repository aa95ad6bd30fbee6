"""Benchmark: from a client's message to the plan the conversation shows, the platform's
share of the path.

The platform app in process (its dispatcher loop running) on a throwaway PostgreSQL; an
org, a client and a conversation made through the API. The org's agent is an in-process
fake behind the dispatcher's port that classifies every message as agentic and files a
plan at once (the fake model: no language model time), and records how long the agent
itself took (the floor: the agent's own time for the same request). MESSAGES client
messages (default 50) are posted one after another through the client's endpoint; for
each, the time from the POST's answer until the client reads the `plan_waiting` system
message in its conversation, beside the agent's own time, p50 and p95.

Not measured here: approval -> result in the client's stream (it needs the operator and
the agent executing; `bench/approval_latency.py` measures approval -> execution).

Run by hand; it prints and asserts nothing.

    .venv/bin/python bench/client_dispatch.py [--messages 50]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # the fake agent lives with the tests

from humanwork_dev.postgres import PostgresServer  # noqa: E402
from platform_api.agents.commands import AgentTarget  # noqa: E402
from platform_api.app import create_app  # noqa: E402
from platform_api.db import make_engine, migrate  # noqa: E402
from tests.platform.conftest import Api, make_settings  # noqa: E402
from tests.platform.dispatch_support import SEED_REQUEST, FakeAgents  # noqa: E402


class TimedAgents(FakeAgents):
    """The fake agent, every message agentic, its own time per command recorded."""

    def __init__(self) -> None:
        super().__init__()
        self.spent: dict[str, float] = {}

    async def send(
        self,
        target: AgentTarget,
        path: str,
        payload: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        started = time.perf_counter()
        answer = await super().send(target, path, payload, idempotency_key)
        conversation = str(payload.get("conversationId"))
        self.spent[conversation] = self.spent.get(conversation, 0.0) + (
            time.perf_counter() - started
        )
        return answer


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _ms(values: list[float]) -> str:
    return f"p50 {_pct(values, 0.5) * 1000:.1f} ms, p95 {_pct(values, 0.95) * 1000:.1f} ms"


async def _one(http: httpx.AsyncClient, org: str, client: dict[str, str]) -> tuple[str, float]:
    r = await http.post(f"/orgs/{org}/conversations", json={"subject": "October"}, headers=client)
    cid = r.json()["id"]
    r = await http.post(
        f"/orgs/{org}/conversations/{cid}/messages", json={"content": SEED_REQUEST}, headers=client
    )
    posted = time.perf_counter()
    while True:
        r = await http.get(f"/orgs/{org}/conversations/{cid}", headers=client)
        if any((m.get("meta") or {}).get("event") == "plan_waiting" for m in r.json()["messages"]):
            return cid, time.perf_counter() - posted
        await asyncio.sleep(0.005)


async def main(postgres: PostgresServer, messages: int) -> None:
    url = await postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}")
    engine = make_engine(url)
    await migrate(engine)
    await engine.dispose()
    settings = make_settings(url, dispatch_interval_seconds=0.02)
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        agent = TimedAgents()
        app.state.dispatcher.agents = agent
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://platform") as http:
            api = Api(http)
            root = await api.admin()
            org = await api.org(root, "bench")
            client = await api.user(root, "client-bench", "client", [org])
            timings = [await _one(http, org, client.headers) for _ in range(messages)]
    totals = [t for _, t in timings]
    floors = [agent.spent.get(cid, 0.0) for cid, _ in timings]
    print(f"client message -> plan visible to the client ({messages} messages, fake model)")
    print(f"  end to end:              {_ms(totals)}")
    print(f"  the agent's own time:    {_ms(floors)} (the floor)")
    print(f"  dispatch interval:       {settings.dispatch_interval_seconds * 1000:.0f} ms")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50)
    with PostgresServer() as server:
        asyncio.run(main(server, parser.parse_args().messages))
