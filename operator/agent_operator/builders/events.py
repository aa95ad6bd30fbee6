"""core/v1 Events about an AgentInstance."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from humanwork_core.resources import (
    API_VERSION,
)

from .naming import (
    MANAGED_BY,
    Manifest,
    _rfc3339,
)


def event(
    body: Mapping[str, Any],
    reason: str,
    message: str,
    *,
    warning: bool,
    now: datetime,
    reporter: str = MANAGED_BY,
) -> Manifest:
    """A core/v1 Event about an AgentInstance (from the object as the API returned it);
    `reporter` names the operator replica that acted (the Event's reportingInstance)."""
    meta = body["metadata"]
    stamp = _rfc3339(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "generateName": f"{meta['name']}.",
            "namespace": meta["namespace"],
            "labels": {"app.kubernetes.io/managed-by": MANAGED_BY},
        },
        "involvedObject": {
            "apiVersion": body.get("apiVersion", API_VERSION),
            "kind": body.get("kind", "AgentInstance"),
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": MANAGED_BY},
        "reportingComponent": MANAGED_BY,
        "reportingInstance": reporter[:128],
        "action": reason,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
