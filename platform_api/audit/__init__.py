"""The append-only, per-org hash-chained audit log: recording, reading, verifying."""
