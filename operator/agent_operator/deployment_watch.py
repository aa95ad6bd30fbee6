"""The operator's own watch of its agents' Deployments, in place of kopf's for that kind.

Each Deployment event (a pod created, turning Ready, counts moving: about six per org)
went through kopf's per-event machinery (worker slots, memories, cause detection, handler
invocation, logging contexts) before the operator's handler looked at two counts; with
other shards' Deployments on the same control plane, each of theirs cost the same to be
dropped. This watch decodes each event once and hands it to the handler directly:

- it lists the Deployments matching its label selector across every namespace (this
  shard's managed agents only: :func:`selector`), then watches from the list's
  resourceVersion, bookmarks included;
- when the API server ends the stream (its `timeoutSeconds`, a restart) or the connection
  drops, it watches again from the last resourceVersion seen;
- on 410 Gone (that version is no longer kept) it lists again: every Deployment listed is
  handed on as MODIFIED (the handler decides from what it reported whether anything
  changed) and every one known before but not listed as DELETED, so a change made while
  the watch was away is never lost. The first listing is handed on to no one (the
  instances' own listing reconciles each of them at start, as with kopf);
- each event is handled in a task of its own, one at a time per Deployment (a newer event
  waiting for the one before is coalesced with it: the latest state, a deletion kept), at
  most `workers` at once, so one slow owner never holds the others;
- it runs from the operator's startup to its cleanup, which kopf runs only while the
  operator leads its shard (:mod:`agent_operator.main` takes the Lease first), and
  :meth:`DeploymentWatch.stop` ends it and every handler task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from agent_operator.builders import MANAGED_BY
from agent_operator.kube import Kube, KubeError
from agent_operator.shards import SHARD_LABEL
from humanwork_core.kube_client import WATCH_READ_SLACK, cluster_path

__all__ = ["DeploymentWatch", "selector"]

Key = tuple[str, str]
Handler = Callable[[str, dict[str, Any]], Awaitable[None]]

PATH = cluster_path("apps/v1", "Deployment")
SERVER_TIMEOUT = 300
"""The `timeoutSeconds` asked of the API server for one stream (then it is watched again)."""
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
"""The waits before watching again after failures in a row (the last one repeated)."""
WORKERS = 200
"""Deployment events handled at once at most."""
LOG = logging.getLogger("humanwork.operator")


def selector(shard: str) -> str:
    """The label selector of the agents' Deployments this shard manages: the operator's
    managed agents, labelled with the shard (none for the default shard)."""
    managed = f"app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component=agent"
    return f"{managed},{SHARD_LABEL}={shard}" if shard else f"{managed},!{SHARD_LABEL}"


def _key(body: dict[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _stub(body: dict[str, Any]) -> dict[str, Any]:
    """What is kept of a Deployment to tell of its deletion if a relisting misses it."""
    meta = body.get("metadata") or {}
    kept = {k: meta[k] for k in ("namespace", "name", "ownerReferences", "labels") if k in meta}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": kept}


class DeploymentWatch:
    """List, then watch, the Deployments matching `label_selector`, handing each change to
    `handle(event_type, body)`; `start()` and `stop()` bound its life."""

    def __init__(
        self,
        kube: Kube,
        label_selector: str,
        handle: Handler,
        *,
        workers: int = WORKERS,
        server_timeout: int = SERVER_TIMEOUT,
    ) -> None:
        self.kube = kube
        self.label_selector = label_selector
        self.handle = handle
        self.server_timeout = server_timeout
        self.known: dict[Key, dict[str, Any]] = {}
        self.version = ""
        self.listings = 0
        self._slots = asyncio.Semaphore(workers)
        self._pending: dict[Key, tuple[str, dict[str, Any]]] = {}
        self._workers: dict[Key, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.listed = asyncio.Event()
        """Set once the first listing is in (the watch is then running)."""

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name="humanwork-deployment-watch")

    async def stop(self) -> None:
        """End the watch and every handler task still running."""
        tasks = [t for t in (self._task, *self._workers.values()) if t is not None]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._workers.clear()
        self._pending.clear()

    async def run(self) -> None:
        """List, then watch, until cancelled."""
        failures = 0
        while True:
            try:
                if not self.version:
                    await self._list()
                events = 0
                async for event in self.kube.stream(
                    PATH, self._query(), self.server_timeout + WATCH_READ_SLACK
                ):
                    events, failures = events + 1, 0
                    self._event(str(event.get("type") or ""), event.get("object") or {})
                if not events:  # ended at once: not a loop of requests
                    await asyncio.sleep(RETRY_SECONDS[0])
                continue  # the server ended the stream: watch again from the version
            except KubeError as exc:
                if exc.status == 410:
                    LOG.info("the Deployment watch's version expired: listing again")
                    self.version = ""
                    continue
                reason: object = exc
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                reason = str(exc) or type(exc).__name__
            wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
            failures += 1
            LOG.warning("the Deployment watch failed (%s); again in %.1fs", reason, wait)
            await asyncio.sleep(wait)

    def _query(self) -> list[tuple[str, str]]:
        return [
            ("watch", "1"),
            ("labelSelector", self.label_selector),
            ("resourceVersion", self.version),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self.server_timeout)),
        ]

    async def _list(self) -> None:
        """List every matching Deployment; after the first listing, hand each on as
        MODIFIED and each known one no longer there as DELETED."""
        seen: dict[Key, dict[str, Any]] = {}
        version = ""
        async for items, listed in self.kube.list_pages(PATH, label_selector=self.label_selector):
            version = listed
            for item in items:
                item.setdefault("apiVersion", "apps/v1")
                item.setdefault("kind", "Deployment")
                seen[_key(item)] = item
        relisting = self.listings > 0
        gone = [stub for key, stub in self.known.items() if key not in seen]
        self.known = {key: _stub(item) for key, item in seen.items()}
        self.version = version
        self.listings += 1
        self.listed.set()
        if relisting:
            for item in seen.values():
                self._dispatch("MODIFIED", item)
            for stub in gone:
                self._dispatch("DELETED", stub)

    def _event(self, kind: str, body: dict[str, Any]) -> None:
        """One event of the stream: note its version, keep what is known, hand it on."""
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self.version = str(version)
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # a BOOKMARK: its version alone
        key = _key(body)
        if kind == "DELETED":
            self.known.pop(key, None)
        else:
            self.known[key] = _stub(body)
        self._dispatch(kind, body)

    def _dispatch(self, kind: str, body: dict[str, Any]) -> None:
        key = _key(body)
        waiting = self._pending.get(key)
        if waiting is not None and waiting[0] == "DELETED":
            kind = "DELETED"  # a deletion waiting is not lost to a newer state
        self._pending[key] = (kind, body)
        if key not in self._workers:
            self._workers[key] = asyncio.create_task(self._work(key))

    async def _work(self, key: Key) -> None:
        """Handle the events of one Deployment in turn, until none is waiting."""
        try:
            while (pending := self._pending.pop(key, None)) is not None:
                async with self._slots:
                    try:
                        await self.handle(*pending)
                    except Exception as exc:  # one Deployment's trouble must not stop others
                        LOG.warning("a Deployment event of %s/%s failed: %s", *key, exc)
        finally:
            self._workers.pop(key, None)
