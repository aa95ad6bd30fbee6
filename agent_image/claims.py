"""The agent's patience with a step's claim held by another call.

The platform's tool proxy answers 409 `tool_call_in_progress` while a call with the step's
key holds its claim in the ledger: a call still running, or one whose platform process died
mid-call, which leaves the claim `started` until its lease runs out (the proxy's
`tool_claim_lease_seconds`, 300 s by default). Then the proxy turns the claim `unknown`
and answers `tool_call_outcome_unknown`: an expert decides. The proxy says in each answer
how long the lease has left (`details.staleInSeconds`).

So the agent never fails a step on `tool_call_in_progress` (it says nothing about the
step): it keeps asking with the same key, for as long as the lease lasts, whatever its
count of other retries. Should the claim still be held a few asks after the lease ran out
(a platform that does not turn it), whether a call with this key reached the upstream is
unknown, and the step waits for an expert as `OutcomeUnknown`, never `Failed`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

IN_PROGRESS_CODE = "tool_call_in_progress"
DEFAULT_LEASE_SECONDS = 300.0
"""The lease assumed when the proxy does not say (the platform's default)."""
OVERDUE_ASKS = 3
"""Asks after the lease ran out before the step is left to an expert."""


@dataclass
class ClaimWatch:
    """The lease of one step's claim as the proxy's answers tell it."""

    clock: Callable[[], float] = time.monotonic
    deadline: float | None = None
    overdue: int = 0

    def lease_left(self, details: dict[str, object]) -> float:
        """Seconds until the proxy turns the claim `unknown`: as it says, else the default
        lease counted from the first `in progress` answer."""
        try:
            return float(str(details["staleInSeconds"]))
        except (KeyError, ValueError):
            if self.deadline is None:
                self.deadline = self.clock() + DEFAULT_LEASE_SECONDS
            return self.deadline - self.clock()

    def given_up(self, exc: Exception) -> bool:
        """Whether to stop asking: the lease ran out and `OVERDUE_ASKS` asks since still
        found the claim held."""
        details = getattr(exc, "details", None) or {}
        held_past_lease = self.lease_left(dict(details)) <= 0
        self.overdue = self.overdue + 1 if held_past_lease else 0
        return self.overdue > OVERDUE_ASKS
