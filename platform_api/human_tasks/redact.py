"""The review queue's redactor, `platform_api.redaction.redact` (shared with the client's
read model of a conversation's tasks, which shows step parameters redacted like the
queue)."""

from __future__ import annotations

from platform_api.redaction import redact

__all__ = ["redact"]
