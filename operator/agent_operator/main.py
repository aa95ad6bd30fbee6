"""Entry point of the `humanwork-operator` console script (and `python -m agent_operator`).

Runs kopf with the operator's handlers, cluster-wide or for the namespaces given, with
kopf's liveness endpoint. Several replicas may run: they elect one leader per shard on a
Lease (:mod:`agent_operator.leadership`); the others stand by, answering their liveness
probe, until the leader goes. A leader that loses its Lease stops and exits with status 1
(its pod restarts as a standby). See docs/operations.md.

The operator's image holds neither official Kubernetes client (requirements-operator.lock),
so kopf, which imports them when they are installed, finds none there; kopf logs in with
its own kubeconfig and ServiceAccount readers wherever it runs
(:func:`agent_operator.handlers.login`), as :mod:`agent_operator.kube` does.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
from collections.abc import AsyncIterator
from urllib.parse import urlsplit

import kopf
from aiohttp import web
from kopf._core.engines.peering import Identity

from agent_operator.config import OperatorSettings
from agent_operator.kube import Kube
from agent_operator.leadership import Leadership
from agent_operator.memories import EphemeralMemories
from humanwork_core import logs, tracing

LOG = logging.getLogger("humanwork.operator")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-operator", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        help="watch only this namespace (repeatable; glob patterns allowed); default: all",
    )
    parser.add_argument(
        "--liveness",
        default="http://0.0.0.0:8080/healthz",
        help="kopf's liveness endpoint URL (empty to disable)",
    )
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    logs.configure(logging.DEBUG if args.verbose else logging.INFO)
    tracing.setup("humanwork-operator")
    from agent_operator import handlers  # noqa: F401  (registers the handlers with kopf)

    settings = OperatorSettings.from_env(os.environ)
    return asyncio.run(_run(args, settings))


async def _run(args: argparse.Namespace, settings: OperatorSettings) -> int:
    """Lead (or run alone without a Lease), then operate until stopped or deposed."""
    # kopf's default identity asks the password database for the user, which a
    # container's numeric user (10001) is not in: the host name (the pod's) instead
    identity = settings.replica
    stop: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    if not settings.lease:
        await _operate(args, identity, stop)
        return 0
    kube = await Kube.connect()
    leadership = Leadership(
        kube,
        settings.platform_namespace,
        settings.lease,
        identity,
        duration=settings.lease_duration_seconds,
        renew_deadline=settings.lease_renew_deadline_seconds,
        retry=settings.lease_retry_seconds,
    )
    try:
        async with _standby_liveness(args.liveness):
            LOG.info("standing by for the Lease %s as %s", settings.lease, identity)
            await leadership.acquire()
        lost = asyncio.Event()
        holding = asyncio.create_task(leadership.hold(lost))
        deposing = asyncio.create_task(_stop_when(lost, stop))
        try:
            await _operate(args, identity, stop)
        finally:
            holding.cancel()
            deposing.cancel()
            if not lost.is_set():
                await leadership.release()
        return 1 if lost.is_set() else 0
    finally:
        await kube.close()


async def _operate(args: argparse.Namespace, identity: str, stop: asyncio.Future[None]) -> None:
    await kopf.operator(
        standalone=True,
        clusterwide=not args.namespace,
        namespaces=args.namespace,
        liveness_endpoint=args.liveness or None,
        identity=Identity(identity),
        stop_flag=stop,
        # the cleanup handler settles the flag when a signal stops kopf: kopf's own waiter
        # on it would otherwise be a task still running at exit, waited for 5 s and then
        # cancelled, and a rollout's handover would wait for that too
        memo=kopf.Memo(stop=stop),
        memories=EphemeralMemories(),
    )


async def _stop_when(lost: asyncio.Event, stop: asyncio.Future[None]) -> None:
    await lost.wait()
    if not stop.done():
        stop.set_result(None)


@contextlib.asynccontextmanager
async def _standby_liveness(url: str) -> AsyncIterator[None]:
    """Answer the liveness probe while standing by (kopf's own endpoint starts with it)."""
    if not url:
        yield
        return
    parts = urlsplit(url)

    async def alive(_: web.Request) -> web.Response:
        return web.json_response({"standby": True})

    app = web.Application()
    app.router.add_get(parts.path or "/", alive)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, parts.hostname or "0.0.0.0", parts.port or 80, reuse_address=True)
    await site.start()
    try:
        yield
    finally:
        await runner.cleanup()


if __name__ == "__main__":
    raise SystemExit(main())
