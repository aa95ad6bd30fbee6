"""Alembic migrations of the platform's database; run by `platform_api.db.migrate`."""
