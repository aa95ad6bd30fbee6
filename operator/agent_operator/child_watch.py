"""The operator's own watches of the children it manages, in place of kopf's for them.

Each child's event (about six per org when its children are created, and every change of
its Deployment: a pod created, turning Ready, counts moving) went through kopf's
per-event machinery (worker slots, memories, cause detection, handler invocation, logging
contexts) before the operator's handler looked at its type or at two counts; each child
of another shard's org cost the same to be dropped. A :class:`ChildWatch` of one kind
decodes each event once and hands it to the handler directly:

- it lists the kind's objects matching its label selector across every namespace (the
  operator's managed agents' children; for Deployments this shard's alone:
  :func:`deployment_selector`), then watches from the list's resourceVersion, bookmarks
  included;
- when the API server ends the stream (its `timeoutSeconds`, a restart) or the connection
  drops, it watches again from the last resourceVersion seen;
- on 410 Gone (that version is no longer kept) it lists again: every object listed is
  handed on as MODIFIED (the handler decides from what it reported whether anything
  changed) and every one known before but not listed as DELETED, so a change made while
  the watch was away is never lost. The first listing is handed on to no one (the
  instances' own listing reconciles each of them at start, as with kopf);
- only the event types asked for are handed on (the handlers act on no ADDED: their own
  creations); each in a task of its own, one at a time per object (a newer event waiting
  for the one before is coalesced with it: the latest state, a deletion kept), at most
  `workers` at once, so one slow owner never holds the others;
- it runs from the operator's startup to its cleanup, which kopf runs only while the
  operator leads its shard (:mod:`agent_operator.main` takes the Lease first), and
  :meth:`ChildWatch.stop` ends it and every handler task.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from agent_operator.builders import MANAGED_BY
from agent_operator.kube import Kube, KubeError
from agent_operator.shards import SHARD_LABEL
from humanwork_core.kube_client import WATCH_READ_SLACK, cluster_path

__all__ = ["CHILD_SELECTOR", "ChildWatch", "deployment_selector"]

Key = tuple[str, str]
Owner = tuple[str, str, str] | None
"""An object's controlling owner: (apiVersion, kind, name)."""
Handler = Callable[[str, dict[str, Any]], Awaitable[None]]

EVENT_TYPES = ("ADDED", "MODIFIED", "DELETED")
SERVER_TIMEOUT = 300
"""The `timeoutSeconds` asked of the API server for one stream (then it is watched again)."""
RETRY_SECONDS = (0.5, 1.0, 2.0, 5.0)
"""The waits before watching again after failures in a row (the last one repeated)."""
WORKERS = 200
"""Events of one kind handled at once at most."""
LOG = logging.getLogger("humanwork.operator")


CHILD_SELECTOR = f"app.kubernetes.io/managed-by={MANAGED_BY},app.kubernetes.io/component=agent"
"""The label selector of the children of every agent the operator manages."""


def deployment_selector(shard: str) -> str:
    """The label selector of the agents' Deployments this shard manages: the operator's
    managed agents, labelled with the shard (none for the default shard)."""
    return (
        f"{CHILD_SELECTOR},{SHARD_LABEL}={shard}" if shard else f"{CHILD_SELECTOR},!{SHARD_LABEL}"
    )


def _key(body: dict[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _owner(body: dict[str, Any]) -> Owner:
    """The controlling owner reference of an object, as kept to tell of its deletion if a
    relisting misses it (little memory for every child of every org)."""
    for ref in (body.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return (
                sys.intern(str(ref.get("apiVersion"))),
                sys.intern(str(ref.get("kind"))),
                str(ref.get("name")),
            )
    return None


def _stub(api_version: str, kind: str, key: Key, owner: Owner) -> dict[str, Any]:
    """An object gone while the watch was away, as its DELETED event would carry it."""
    meta: dict[str, Any] = {"namespace": key[0], "name": key[1]}
    if owner is not None:
        ref = {"apiVersion": owner[0], "kind": owner[1], "name": owner[2], "controller": True}
        meta["ownerReferences"] = [ref]
    return {"apiVersion": api_version, "kind": kind, "metadata": meta}


class ChildWatch:
    """List, then watch, the objects of `kind` matching `label_selector` across every
    namespace, handing each change of the `types` asked for to `handle(event_type, body)`;
    `start()` and `stop()` bound its life."""

    def __init__(
        self,
        kube: Kube,
        api_version: str,
        kind: str,
        label_selector: str,
        handle: Handler,
        *,
        types: tuple[str, ...] = EVENT_TYPES,
        workers: int = WORKERS,
        server_timeout: int = SERVER_TIMEOUT,
    ) -> None:
        self.kube = kube
        self.api_version, self.kind = api_version, kind
        self.path = cluster_path(api_version, kind)
        self.types = types
        self.label_selector = label_selector
        self.handle = handle
        self.server_timeout = server_timeout
        self.known: dict[Key, Owner] = {}
        self.version = ""
        self.listings = 0
        self._slots = asyncio.Semaphore(workers)
        self._pending: dict[Key, tuple[str, dict[str, Any]]] = {}
        self._workers: dict[Key, asyncio.Task[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.listed = asyncio.Event()
        """Set once the first listing is in (the watch is then running)."""

    def start(self) -> None:
        self._task = asyncio.create_task(self.run(), name=f"humanwork-watch-{self.kind}")

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
                    self.path, self._query(), self.server_timeout + WATCH_READ_SLACK
                ):
                    events, failures = events + 1, 0
                    self._event(str(event.get("type") or ""), event.get("object") or {})
                if not events:  # ended at once: not a loop of requests
                    await asyncio.sleep(RETRY_SECONDS[0])
                continue  # the server ended the stream: watch again from the version
            except KubeError as exc:
                if exc.status == 410:
                    LOG.info("the %s watch's version expired: listing again", self.kind)
                    self.version = ""
                    continue
                reason: object = exc
            except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as exc:
                reason = str(exc) or type(exc).__name__
            wait = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
            failures += 1
            LOG.warning("the %s watch failed (%s); again in %.1fs", self.kind, reason, wait)
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
        """List every matching object; after the first listing, hand each on as MODIFIED
        and each known one no longer there as DELETED."""
        seen: dict[Key, dict[str, Any]] = {}
        version = ""
        pages = self.kube.list_pages(self.path, label_selector=self.label_selector)
        async for items, listed in pages:
            version = listed
            for item in items:
                item.setdefault("apiVersion", self.api_version)
                item.setdefault("kind", self.kind)
                seen[_key(item)] = item
        relisting = self.listings > 0
        gone = [
            _stub(self.api_version, self.kind, key, owner)
            for key, owner in self.known.items()
            if key not in seen
        ]
        self.known = {key: _owner(item) for key, item in seen.items()}
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
        if kind not in EVENT_TYPES:
            return  # a BOOKMARK: its version alone
        key = _key(body)
        if kind == "DELETED":
            self.known.pop(key, None)
        elif key not in self.known:
            self.known[key] = _owner(body)
        if kind in self.types:
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
        """Handle the events of one object in turn, until none is waiting."""
        try:
            while (pending := self._pending.pop(key, None)) is not None:
                async with self._slots:
                    try:
                        await self.handle(*pending)
                    except Exception as exc:  # one object's trouble must not stop the others
                        LOG.warning("a %s event of %s/%s failed: %s", self.kind, *key, exc)
        finally:
            self._workers.pop(key, None)
