"""Which org namespaces this operator serves, and when an AgentInstance needs a reconcile.

Shards: an org namespace labelled `humanwork.io/shard=<name>` is served by the operators
started with `HUMANWORK_OPERATOR_SHARD=<name>`; a namespace without the label by those
with no shard. Every shard's operator sees every event (kopf watches cluster-wide) and
drops those of namespaces that are not its own before it reads or writes anything, so an
org is served by exactly one shard; relabelling a namespace hands it over: the old shard
forgets it, the new one adopts it (reconciles its instances and ticks its tasks).

Changes: the operator reconciles an AgentInstance when what it declares changes (its spec,
labels and annotations: the *fingerprint*), never for its own status writes. It keeps the
fingerprints in memory rather than in kopf's annotations, so a shard that does not serve
an object never writes to it, and a new leader reconciles everything once at its start.

Pure functions and a small cache, no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from humanwork_core.resources.common import GROUP

SHARD_LABEL = f"{GROUP}/shard"
"""The namespace label that names the operator shard serving an org."""

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def shard_of(namespace: Mapping[str, Any] | None) -> str:
    """The shard a namespace object names ("" without the label)."""
    labels = ((namespace or {}).get("metadata") or {}).get("labels") or {}
    return str(labels.get(SHARD_LABEL) or "")


def fingerprint(body: Mapping[str, Any], ignored_prefix: str) -> str:
    """A digest of what an AgentInstance declares: its spec, labels and annotations except
    kopf's (`ignored_prefix`) and kubectl's last-applied copy; its status is left out."""
    meta = body.get("metadata") or {}
    annotations = {
        key: value
        for key, value in (meta.get("annotations") or {}).items()
        if not key.startswith(ignored_prefix) and key != LAST_APPLIED
    }
    declared = [body.get("spec"), meta.get("labels") or {}, annotations]
    return hashlib.sha256(json.dumps(declared, sort_keys=True).encode()).hexdigest()


def trigger_for(event_type: str | None, known: bool) -> str:
    """The reconcile's trigger for the metrics: `resume` for the operator's initial listing
    (and anything it had not seen yet), `create` for a new object, `update` otherwise."""
    if event_type == "ADDED" and not known:
        return "create"
    if not known:
        return "resume"
    return "update"


def label_selector(labels: Mapping[str, str | None]) -> str:
    """A label selector that matches exactly `labels` (None: the label exists)."""
    return ",".join(key if value is None else f"{key}={value}" for key, value in labels.items())


class Namespaces:
    """The shard of every org namespace seen, filled from the namespace watch."""

    def __init__(self, shard: str) -> None:
        self.shard = shard
        self._of: dict[str, str] = {}

    def known(self, name: str) -> str | None:
        """The shard of namespace `name`, or None when it has not been seen."""
        return self._of.get(name)

    def serves(self, shard: str | None) -> bool:
        """Whether a namespace of shard `shard` is this operator's."""
        return shard == self.shard

    def learn(self, name: str, shard: str | None) -> str | None:
        """Record `name`'s shard (None: the namespace is gone); the shard it had before
        (None when it had not been seen)."""
        before = self._of.get(name)
        if shard is None:
            self._of.pop(name, None)
        else:
            self._of[name] = shard
        return before
