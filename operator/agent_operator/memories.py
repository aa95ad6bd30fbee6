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
"""

from __future__ import annotations

from typing import Any

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
