"""Named points at which the fault tests stop the platform dead (SIGKILL of its own
process), so that a crash lands exactly there and not merely somewhere near.

Off unless the process was STARTED with `HUMANWORK_TEST_FAULT_POINT` naming the point (read
once, at import): nothing a request carries can set or change it. The process kills itself
the first time it reaches the named point. The points:
- `decision.before_status_write`: a decision judged, its status write not sent;
- `decision.after_status_write`: the decision in the task's status, its audit row and the
  answer not yet written.
"""

from __future__ import annotations

import os
import signal

ARMED = os.environ.get("HUMANWORK_TEST_FAULT_POINT", "")


def reach(point: str) -> None:
    """Die here (SIGKILL, nothing flushed) when the process was started armed at `point`."""
    if ARMED and point == ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
