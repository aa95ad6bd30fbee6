"""The root of the error hierarchy shared by the core, the platform API, the operator and agent.

Every error carries a stable machine-readable `code` (for example `human_task_expired`);
the platform API maps codes to one JSON error shape and HTTP statuses, the operator and
agent log them. Subclasses set `code` as a class attribute.
"""

from __future__ import annotations

from typing import ClassVar


class HumanworkError(Exception):
    """Base of every error the shared core raises on purpose."""

    code: ClassVar[str] = "humanwork_error"

    def __init__(self, message: str, **details: str) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, str] = dict(details)

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def to_dict(self) -> dict[str, object]:
        """The error as JSON-ready data: code, message and details."""
        return {"code": self.code, "message": self.message, "details": dict(self.details)}
