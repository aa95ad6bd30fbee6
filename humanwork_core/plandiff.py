"""What a revised plan changed against the plan it revises (`spec.revisionOf`): the steps
added, removed, and changed (their tool, risk, kind, description or parameters, with each
parameter's value before and after). Steps are matched by id, the plan's own key. Pure."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from humanwork_core.resources import Step

_FIELDS = ("description", "kind", "tool", "risk")
_MISSING = None


@dataclass(frozen=True)
class StepChange:
    """One step present in both plans, changed."""

    step_id: str
    fields: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Changed fields other than the parameters: name -> (before, after)."""
    parameters: dict[str, tuple[Any, Any]] = field(default_factory=dict)
    """Changed parameters: name -> (before, after); None where one side lacks it."""


@dataclass(frozen=True)
class PlanDiff:
    """The difference between two plans."""

    added: tuple[str, ...]
    removed: tuple[str, ...]
    changed: tuple[StepChange, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)


def _value(step: Step, name: str) -> Any:
    value = getattr(step, name)
    return getattr(value, "value", value)


def _change(before: Step, after: Step) -> StepChange | None:
    fields = {
        name: (_value(before, name), _value(after, name))
        for name in _FIELDS
        if _value(before, name) != _value(after, name)
    }
    old, new = dict(before.parameters or {}), dict(after.parameters or {})
    parameters = {
        key: (old.get(key, _MISSING), new.get(key, _MISSING))
        for key in sorted(set(old) | set(new))
        if old.get(key, _MISSING) != new.get(key, _MISSING) or (key in old) != (key in new)
    }
    if not fields and not parameters:
        return None
    return StepChange(after.id, fields, parameters)


def plan_diff(before: Iterable[Step], after: Iterable[Step]) -> PlanDiff:
    """The diff from plan `before` to plan `after` (steps in `after`'s order)."""
    old = {step.id: step for step in before}
    new = {step.id: step for step in after}
    changes = [_change(old[i], step) for i, step in new.items() if i in old]
    return PlanDiff(
        added=tuple(i for i in new if i not in old),
        removed=tuple(i for i in old if i not in new),
        changed=tuple(c for c in changes if c is not None),
    )
