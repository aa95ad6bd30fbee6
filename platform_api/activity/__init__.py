"""Whether an org is active: read from the database on every check, so
a deactivation holds on every replica at once; the guard that refuses a deactivated org's
new work."""
