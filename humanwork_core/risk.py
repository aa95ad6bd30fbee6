"""The risk levels of a step, on their own so that the action catalog and the resource
models can both import them (the models' CEL rules are generated from the catalog)."""

from __future__ import annotations

from enum import StrEnum


class Risk(StrEnum):
    """Risk level of a step, from read-only (low) to destructive or financial (critical)."""

    LOW = "low"
    MEDIUM = "medium"
    HIGH = "high"
    CRITICAL = "critical"

    @property
    def rank(self) -> int:
        """0 for low up to 3 for critical."""
        return list(Risk).index(self)
