"""Org deactivation and reactivation (issue 15, item 4, UC-20)."""
