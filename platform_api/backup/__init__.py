"""Backup and restore of the platform's database and its resources (`python -m
platform_api.backup`): see `backup.cli` and docs/operations.md, "Backup and restore"."""
