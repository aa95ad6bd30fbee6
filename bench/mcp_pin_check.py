"""What re-reading a tool's definition before each call costs: calls per second and p95
of `refund_order` on the fake MCP server (the SDK's, in a process of its own on
loopback), made straight with the SDK's client (a session, `tools/call`) beside the
platform's upstream path for an org's MCP server (`platform_api.mcp_servers.client`: a
session through the egress client, `tools/list`, the definition hash compared with the
pinned one, `tools/call`), in the same run, alternating. The ratio is the figure.

    .venv/bin/python bench/mcp_pin_check.py [--calls 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from humanwork_dev.fakes.mcp_server import FakeMcpServer
from platform_api.mcp_servers import client
from platform_api.tools.upstreams.egress import Egress, EgressPolicy

ARGS = {"order_id": "A-17", "amount": 2500}


async def straight(fake: FakeMcpServer) -> None:
    import httpx

    headers = {"Authorization": f"Bearer {fake.token}"}
    async with (
        httpx.AsyncClient(headers=headers, timeout=30) as http,
        streamable_http_client(fake.url, http_client=http) as (r, w, _),
        ClientSession(r, w) as session,
    ):
        await session.initialize()
        await session.call_tool("refund_order", ARGS)


def pinned_path(fake: FakeMcpServer, pin: str) -> Callable[[], Awaitable[None]]:
    egress = Egress(EgressPolicy.parse(["127.0.0.1/32"]))

    async def run() -> None:
        async with client.connect(fake.url, f"Bearer {fake.token}", egress, 30) as connection:
            await connection.call("refund_order", ARGS, pin)

    return run


def summary(name: str, samples: list[float]) -> float:
    p95 = statistics.quantiles(samples, n=20)[18] * 1000
    rate = len(samples) / sum(samples)
    print(f"{name:<28} {rate:7.1f} calls/s   p95 {p95:6.1f} ms")
    return rate


async def main(calls: int) -> None:
    with FakeMcpServer() as fake:
        egress = Egress(EgressPolicy.parse(["127.0.0.1/32"]))
        async with client.connect(fake.url, f"Bearer {fake.token}", egress, 30) as c:
            pin = {t.name: client.hash_of(t) for t in await c.tools()}["refund_order"]
        path = pinned_path(fake, pin)
        times: dict[str, list[float]] = {"straight": [], "pinned": []}
        for _ in range(calls):
            for name, call in (("straight", lambda: straight(fake)), ("pinned", path)):
                started = time.perf_counter()
                await call()
                times[name].append(time.perf_counter() - started)
        direct = summary("straight to the server", times["straight"])
        checked = summary("platform path (pin checked)", times["pinned"])
        print(f"ratio (platform path / straight): {checked / direct:.2f}")
        assert len(fake.calls()) == 2 * calls


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    asyncio.run(main(parser.parse_args().calls))
