"""The operator registers event handlers and activities only: kopf's per-object memory,
which `agent_operator.memories` keeps for no object, is then never needed (on-create/update
handlers, daemons, timers and indexes would need it), nor the essence of each object kopf
would otherwise deep-copy on every event (`agent_operator.memories.EventsOnlyDiffBase`)."""

from __future__ import annotations

import kopf

from agent_operator import handlers  # registers the handlers with kopf


def test_only_event_handlers_and_activities_are_registered() -> None:
    registry = kopf.get_default_registry()
    assert registry._watching.get_all_handlers(), "the event handlers are registered"
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()
    assert not registry._indexing.get_all_handlers()
    assert not registry._webhooks.get_all_handlers()


LOGIN = "authentication"  # kopf's activity of the login handlers (a StrEnum, not exported)


def test_kopf_logs_in_only_through_the_operators_own_login_even_beside_a_client() -> None:
    # the control: this venv holds the official client, and kopf registered its login
    # through it as a fallback (the one it would use without the operator's handler)
    registry = kopf.get_default_registry()
    every = [h.id for h in registry._activities._handlers if h.activity == LOGIN]
    assert "login_via_client" in every
    used = registry._activities.get_handlers(activity=LOGIN)
    assert [h.fn for h in used] == [handlers.login]


def test_no_essence_is_built_or_fetched_for_event_handlers() -> None:
    """kopf's diff base, the essence it deep-copies from every object on every event, is
    read only by the changing and spawning handlers held absent above."""
    from agent_operator.memories import EventsOnlyDiffBase

    storage = EventsOnlyDiffBase(prefix="kopf.humanwork.io")
    body = kopf.Body(
        {
            "metadata": {
                "name": "agent-agent",
                "labels": {"a": "b"},
                "annotations": {"kopf.humanwork.io/last-handled-configuration": "{}"},
            },
            "spec": {"template": {"spec": {"containers": [{"name": "agent"}]}}},
        }
    )
    assert storage.build(body=body) == {}
    assert storage.fetch(body=body) is None


def test_the_empty_essence_is_not_copied_to_be_cleared() -> None:
    from agent_operator.memories import EventsOnlyDiffBase, EventsOnlyProgress

    essence = EventsOnlyDiffBase(prefix="kopf.humanwork.io").build(body=kopf.Body({}))
    assert EventsOnlyProgress(prefix="kopf.humanwork.io").clear(essence=essence) is essence
