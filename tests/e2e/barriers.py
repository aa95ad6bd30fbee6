"""Barriers for "nothing happened" checks of the end-to-end tests: instead of sleeping and
then finding nothing, a test first proves that the thing which would have acted has
acted on something that came later.

`agent_caught_up(world)` plans a control task, approves its first step and waits until
the agent executed it. The agent handles its tasks' changes in the order its watch
delivers them, so once the control step ran, it has seen every change made before the
control was planned, and would have acted on it (the positive control: the same path
does act on an approved step).
"""

from __future__ import annotations

from tests.e2e.conftest import World, execution_state


async def agent_caught_up(world: World) -> None:
    """Return once the agent executed the approved first step of a task planned now."""
    control = await world.plan()
    step = control["steps"][0]["id"]
    decided = await world.decide(control["name"], step)
    assert decided.status_code == 200, decided.text
    await world.until(control["name"], lambda t: execution_state(t, step) == "Succeeded")
