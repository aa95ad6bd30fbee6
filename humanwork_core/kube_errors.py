"""One family of Kubernetes API errors, raised by all three components' clients (the
operator's, the platform's and the agent's), so a caller catches the same class whoever
made the request.

:func:`error_from_status` turns an API answer (its HTTP status and `Status` body) into
the typed error. A 403 that a ValidatingAdmissionPolicy gave is both forbidden and
invalid (:class:`KubePolicyRefused`): RBAC-minded callers catch `KubeForbidden`,
validation-minded ones `KubeInvalid`.

Pure data, no I/O.
"""

from __future__ import annotations

from typing import Any


class KubeError(Exception):
    """The Kubernetes API refused or failed a request."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


class KubeUnreachable(KubeError):
    """The API server could not be reached (status 503 by convention)."""


class KubeNotFound(KubeError):
    """404: the object does not exist."""


class KubeConflict(KubeError):
    """409: the name is taken, or a resourceVersion precondition failed."""


class KubeGone(KubeError):
    """410: a watch's resourceVersion is too old; list again and watch from there."""


class KubeForbidden(KubeError):
    """403: RBAC or an admission policy refused the request."""


class KubeInvalid(KubeError):
    """422: the object fails the CRD schema or its validation rules (or a policy's)."""


class KubePolicyRefused(KubeForbidden, KubeInvalid):
    """403 from a ValidatingAdmissionPolicy: the object is refused by a rule."""


_KINDS: dict[int, type[KubeError]] = {
    403: KubeForbidden,
    404: KubeNotFound,
    409: KubeConflict,
    410: KubeGone,
    422: KubeInvalid,
}


def error_from_status(status: int, body: Any) -> KubeError:
    """The typed error of an API answer (`body` a Status object, or anything)."""
    reason, message = "", ""
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or "")
        status = int(body.get("code") or status)
    kind = _KINDS.get(status, KubeError)
    if status == 403 and "ValidatingAdmissionPolicy" in message:
        kind = KubePolicyRefused
    return kind(status, reason or "Error", message or f"HTTP {status}")
