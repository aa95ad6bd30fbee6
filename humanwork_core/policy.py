"""Who sets the bar: the org's approval policy and how a task's own policy combines with it.

An org's policy is set on the platform by a capability (`policy.manage`) that agents and
requesters do not have, and is audited. A task's `spec.policy` is written by whoever
created the task (an agent, a requester, kubectl), so it may only make the bar higher:

- auto-approval: a step is approved without a human only when it calls a read-only
  action of the catalog, its *effective* risk
  (:func:`effective_risk`: the higher of what it declares and the action catalog's
  minimum) is `low`, the org opted in (`autoApproveLow`) AND the task lists `low` in
  `spec.policy.autoApprove`. Nothing else is ever auto-approved;
- quorum: a step needs the larger of the org's and the task's number of distinct approvals
  for its effective risk.

Pure data and functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import Field, JsonValue

from . import catalog
from .resources import RequiredApprovals, Risk, Step, StepKind, TaskPolicy
from .resources.common import ResourceModel


class OrgPolicy(ResourceModel):
    """An org's approval policy (`GET/PUT /orgs/{orgId}/policy`)."""

    auto_approve_low: bool = Field(
        default=False,
        description="Whether low-risk action steps (read-only by the action catalog) may be "
        "approved without a human when a task also asks for it. Off by default.",
    )
    required_approvals: RequiredApprovals = Field(
        default_factory=RequiredApprovals,
        description="The least number of distinct experts who must approve a step, per "
        "effective risk; a task may ask for more, never fewer.",
    )


STRICT = OrgPolicy()
"""The policy of an org that set none: no auto-approval, the default quorum."""


def step_action(step: Step, parameters: Mapping[str, JsonValue] | None = None) -> str | None:
    """The action a step calls (`parameters.action`), from `parameters` when given."""
    value = (step.parameters if parameters is None else parameters).get("action")
    return value if isinstance(value, str) else None


def effective_risk(step: Step, parameters: Mapping[str, JsonValue] | None = None) -> Risk:
    """The risk the approval rules use: the higher of the step's declared risk and the
    catalog's minimum for its action (with `parameters`, for the action they name)."""
    if step.kind is not StepKind.ACTION:
        return step.risk
    return catalog.higher(step.risk, catalog.minimum_risk(step.tool, step_action(step, parameters)))


def required_approvals(org: OrgPolicy, task: TaskPolicy, risk: Risk) -> int:
    """Distinct approvals a step of this effective risk needs: the stricter of the two."""
    return max(org.required_approvals.for_risk(risk), task.required_approvals.for_risk(risk))


def auto_approves(org: OrgPolicy, task: TaskPolicy, step: Step) -> bool:
    """Whether the policies let this step be approved without a human."""
    known = catalog.find(step.tool, step_action(step))
    return (
        step.kind is StepKind.ACTION
        and known is not None
        and not known.side_effect
        and org.auto_approve_low
        and Risk.LOW in task.auto_approve
        and effective_risk(step) is Risk.LOW
    )
