"""Liveness and readiness of the platform API."""
