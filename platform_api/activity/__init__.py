"""Whether an org is active (issue 15, item 4): read from the database on every check, so
a deactivation holds on every replica at once; the guard that refuses a deactivated org's
new work."""
