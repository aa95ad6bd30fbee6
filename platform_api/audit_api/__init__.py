"""The audit log over HTTP (`GET /audit`): a router above the principal's checks, which
themselves record their refusals in the log (`platform_api.audit`, below them both)."""
