"""API tests of the platform API on a real PostgreSQL."""
