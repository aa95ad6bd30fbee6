"""On the shared floor: the append-only, per-org hash-chained audit log: recording
(`service.record`, `record_detached`), the chain's rules (`chain`), reading and appending
(`repository`), verifying, and anchoring its chain heads in signed checkpoints
(`checkpoints`) kept outside the database (`store`). Every slice records here, and so do
the principal's checks below them; the log's HTTP router and its commands are the slice
`platform_api.audit`, above."""
