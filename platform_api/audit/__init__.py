"""The append-only, per-org hash-chained audit log: recording, reading, verifying, and
anchoring its chain heads in signed checkpoints kept outside the database (its HTTP
router is `platform_api.audit_api`, above the principal checks that record here)."""
