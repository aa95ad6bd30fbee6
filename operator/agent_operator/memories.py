"""kopf's per-object memory, kept for no object: every handler of this operator is an
event handler (`kopf.on.event`) or an activity (startup, cleanup), none of which uses it.

kopf remembers every object of every resource it watches (a `ResourceMemory`: a copy of
the operator's memo, an error throttler, daemon and indexing records) from the first event
it sees until the object is deleted, whether a handler serves it or not. The operator
watches cluster-wide: namespaces, AgentInstances, AgenticTasks and seven kinds of
children, so every ServiceAccount and ConfigMap of every namespace (each has its
`default` ServiceAccount and `kube-root-ca.crt`), and every org of every other shard,
would cost memory in every shard's operator, about 1 KiB each, for nothing.

With the memory made ephemeral, each event gets a fresh one (the memo copied from the
operator's, as kopf does for a new object). What that drops is only what on-create/update
handlers, daemons, timers and indexes would need (none here: `tests/unit/test_operator_
registry.py` holds the operator to event handlers), and kopf's throttling of its own
repeated internal errors on one object, which event handlers never raise into.

This uses kopf's internal `ResourceMemories` (kopf.operator(memories=...)), as the entry
point already uses its peering `Identity`.

For the same reason no object's *essence* is built: kopf deep-copies the whole body of
every object on every event (managed fields, pod templates, status) to diff it against
the last handled one, which only on-create/update/field handlers and daemons read. That
copy was about a fifth of the operator's CPU in a burst of orgs (a profile of
`bench/provision.py`); :class:`EventsOnlyDiffBase` builds an empty essence instead, and
:class:`EventsOnlyProgress` does not copy that empty essence again to clear kopf's
annotations from it on every event (a percent of the operator's CPU in a burst).
"""

from __future__ import annotations

from typing import Any

import kopf
from kopf._core.reactor.inventory import ResourceMemories, ResourceMemory


class EphemeralMemories(ResourceMemories):
    """kopf's memories, none kept: each recall is a fresh memory."""

    async def recall(
        self,
        raw_body: Any,
        *,
        memobase: Any = None,
        noticed_by_listing: bool = False,
        ephemeral: bool = False,
    ) -> ResourceMemory:
        memory: ResourceMemory = await super().recall(
            raw_body, memobase=memobase, noticed_by_listing=noticed_by_listing, ephemeral=True
        )
        return memory


class EventsOnlyDiffBase(kopf.AnnotationsDiffBaseStorage):
    """kopf's diff base for an operator of event handlers only: nothing is remembered
    (nothing is stored: only changing handlers store one) and the essence of an object
    is empty, not a deep copy of its body."""

    def build(self, *, body: Any, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: Any) -> kopf.BodyEssence | None:
        return None


class EventsOnlyProgress(kopf.AnnotationsProgressStorage):
    """kopf's progress storage under its annotations' prefix, for an operator of event
    handlers only (which record no progress): the essence it is asked to clear of kopf's
    annotations is the empty one :class:`EventsOnlyDiffBase` builds, given back as is."""

    def clear(self, *, essence: kopf.BodyEssence) -> kopf.BodyEssence:
        return essence
