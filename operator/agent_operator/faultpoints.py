"""Named points at which the fault tests stop the operator dead (SIGKILL of its own
process), so that a leader's crash lands exactly there and not merely somewhere near.

Off unless the process was STARTED with `HUMANWORK_TEST_FAULT_POINT` naming the point (read
once, at import): nothing an AgentInstance carries can set or change it. The process kills
itself the first time it reaches the named point. The points:
- `provision.before_status_write`: a new instance's token minted, its Secret and children
  applied, its status (the token's jti, `Ready`) not yet written;
- `rotation.before_status_write`: a rotated token in the Secret and the children applied,
  the status still naming the old token and the rotation annotation not yet removed.
"""

from __future__ import annotations

import os
import signal

ARMED = os.environ.get("HUMANWORK_TEST_FAULT_POINT", "")


def reach(point: str) -> None:
    """Die here (SIGKILL, nothing flushed) when the process was started armed at `point`."""
    if ARMED and point == ARMED:
        os.kill(os.getpid(), signal.SIGKILL)
