"""The operator registers event handlers and activities only: kopf's per-object memory,
which `agent_operator.memories` keeps for no object, is then never needed (on-create/update
handlers, daemons, timers and indexes would need it)."""

from __future__ import annotations

import kopf

from agent_operator import handlers  # noqa: F401  (registers the handlers with kopf)


def test_only_event_handlers_and_activities_are_registered() -> None:
    registry = kopf.get_default_registry()
    assert registry._watching.get_all_handlers(), "the event handlers are registered"
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()
    assert not registry._indexing.get_all_handlers()
    assert not registry._webhooks.get_all_handlers()
