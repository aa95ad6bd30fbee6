"""Org deactivation and reactivation (UC-20)."""
