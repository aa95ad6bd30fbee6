"""Per-org tool permissions: which tools an org's agents may use, with their config."""
