"""Benchmark: sign-in and `GET /users/me` while 16 clients guess a password in parallel.

On a scratch local control plane and a throwaway PostgreSQL (`_kit.scratch_platform`),
the platform API runs as a real server with a small pool (`--pool 5`, overflow 10, the
`make up` figures the attack was first seen with) and its production password hashing.
The clients' addresses are told apart the way an ingress tells them: the platform trusts
127.0.0.1 as its proxy and each client sends its own `X-Forwarded-For`.

Two phases of `--seconds` each (default 20): quiet, then the burst. In both, one client
signs the account's owner in again and again from its own address, and another reads
`/users/me` again and again; in the burst, GUESSERS clients (default 16), each from an
address of its own (`--addresses 1`: all from one), send wrong passwords for the same
user as fast as they are answered.
Prints each phase's p50/p95 of the owner's sign-in and of `/users/me`, the count of their
failures (anything but 200), and the guessers' answers by status.

Run by hand; it prints and asserts nothing.

    .venv/bin/python bench/signin.py [--seconds 20] [--guessers 16] [--addresses 16]
        [--pool 5] [--without-kubernetes]

`--without-kubernetes`: no control plane, the platform served with no kubeconfig (sign-in
and `/users/me` never touch Kubernetes), for a machine without the cluster binaries.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from _kit import (
    JWT_SECRET,
    PASSWORD,
    TOKEN_PATH,
    bearer,
    credentials,
    login,
    scratch_platform,
    token_of,
)

from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import free_port

OWNER = "owner"


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


@dataclass
class Phase:
    """What one phase measured."""

    signin: list[float] = field(default_factory=list)
    me: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    guesses: Counter[int] = field(default_factory=Counter)

    def report(self, name: str) -> str:
        def ms(values: list[float], q: float) -> str:
            return f"{_pct(values, q) * 1000:.0f} ms"

        return (
            f"{name}: sign-in n={len(self.signin)} p50 {ms(self.signin, 0.5)} "
            f"p95 {ms(self.signin, 0.95)}; /users/me n={len(self.me)} p50 {ms(self.me, 0.5)} "
            f"p95 {ms(self.me, 0.95)}; failures {dict(self.failures) or 0}; "
            f"guesses answered {dict(self.guesses) or '-'} (load {os.getloadavg()[0]:.1f})"
        )


def _as(address: str) -> dict[str, str]:
    return {"X-Forwarded-For": address}


async def _timed(phase: Phase, into: list[float], what: str, call: object) -> None:
    start = time.perf_counter()
    try:
        r = await call  # type: ignore[misc]
    except httpx.HTTPError as exc:
        phase.failures[f"{what} {type(exc).__name__}"] += 1
        return
    if r.status_code == 200:
        into.append(time.perf_counter() - start)
    else:
        phase.failures[f"{what} {r.status_code}"] += 1


async def _owner(http: httpx.AsyncClient, phase: Phase, until: float) -> None:
    body = {"username": OWNER, "password": PASSWORD}
    while time.monotonic() < until:
        post = http.post("/auth/token", json=body, headers=_as("192.0.2.10"))
        await _timed(phase, phase.signin, "sign-in", post)


async def _reader(http: httpx.AsyncClient, phase: Phase, token: str, until: float) -> None:
    headers = {**bearer(token), **_as("192.0.2.11")}
    while time.monotonic() < until:
        await _timed(phase, phase.me, "/users/me", http.get("/users/me", headers=headers))


async def _guesser(
    http: httpx.AsyncClient, phase: Phase, n: int, addresses: int, until: float
) -> None:
    guess, address = 0, f"198.51.100.{n % addresses + 1}"
    while time.monotonic() < until:
        guess += 1
        body = {"username": OWNER, "password": f"guess-{n}-{guess}"}
        try:
            r = await http.post("/auth/token", json=body, headers=_as(address))
            phase.guesses[r.status_code] += 1
        except httpx.HTTPError:
            phase.guesses[0] += 1


async def _phase(url: str, token: str, seconds: float, guessers: int, addresses: int) -> Phase:
    phase = Phase()
    limits = httpx.Limits(max_connections=guessers + 4)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as http:
        until = time.monotonic() + seconds
        await asyncio.gather(
            _owner(http, phase, until),
            _reader(http, phase, token, until),
            *(_guesser(http, phase, n, addresses, until) for n in range(guessers)),
        )
    return phase


def _setup(url: str) -> str:
    """The owner's user (in a bench org) and a token of it."""
    with httpx.Client(base_url=url, timeout=60) as http:
        headers = login(http, "admin")
        org = http.post("/orgs", json={"slug": "bench", "name": "Bench"}, headers=headers)
        user = {"username": OWNER, "password": PASSWORD, "role": "viewer"}
        http.post(
            "/users",
            json={**user, "org_ids": [org.raise_for_status().json()["id"]]},
            headers=headers,
        ).raise_for_status()
        return token_of(http.post(TOKEN_PATH, json=credentials(OWNER)))


@contextmanager
def _platform_alone() -> Iterator[str]:
    """A throwaway PostgreSQL and the platform serving on loopback without Kubernetes;
    its URL."""
    postgres = PostgresServer()
    postgres.start()
    proc: subprocess.Popen[bytes] | None = None
    try:
        database_url = asyncio.run(postgres.create_database("bench"))
        port = free_port()
        with tempfile.TemporaryDirectory(prefix="humanwork-bench-signin-") as tmp:
            env = {
                **os.environ,
                "HUMANWORK_DATABASE_URL": database_url,
                "HUMANWORK_ADMIN_PASSWORD": PASSWORD,
                "HUMANWORK_JWT_SECRET": JWT_SECRET,
            }
            log = (Path(tmp) / "platform.log").open("ab")
            command = [sys.executable, "-m", "platform_api.main", "serve", "--port", str(port)]
            proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT, cwd=tmp)
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while not _healthy(url):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the platform did not start")
                time.sleep(0.2)
            yield url
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(timeout=30)
        postgres.stop()


def _healthy(url: str) -> bool:
    try:
        return httpx.get(f"{url}/healthz", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def _serving(without_kubernetes: bool) -> Iterator[str]:
    if without_kubernetes:
        with _platform_alone() as url:
            yield url
        return
    with scratch_platform("humanwork-bench-signin-") as scratch:
        yield scratch.platform.url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--guessers", type=int, default=16)
    parser.add_argument("--pool", type=int, default=5)
    parser.add_argument("--addresses", type=int, default=16, help="the guessers' addresses")
    parser.add_argument("--without-kubernetes", action="store_true")
    args = parser.parse_args()
    os.environ["HUMANWORK_DATABASE_POOL_SIZE"] = str(args.pool)
    os.environ["HUMANWORK_DATABASE_POOL_OVERFLOW"] = "10"
    os.environ["HUMANWORK_TRUSTED_PROXIES"] = '["127.0.0.1/32"]'
    with _serving(args.without_kubernetes) as url:
        token = _setup(url)
        quiet = asyncio.run(_phase(url, token, args.seconds, 0, 1))
        print(quiet.report("quiet"), flush=True)
        burst = asyncio.run(_phase(url, token, args.seconds, args.guessers, args.addresses))
        name = f"burst of {args.guessers} guessers from {args.addresses} address(es)"
        print(burst.report(name), flush=True)


if __name__ == "__main__":
    main()
