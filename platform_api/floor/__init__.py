"""The shared floor of the platform: what several slices import and what imports no slice.

A piece lives here, not in the slice it serves, when a slice below that slice's router
needs it: `auth` builds every request's principal from the accounts and records its
refusals in the audit log, and every router sits on `auth`, so these pieces cannot live
in `users` or the audit slice without a cycle. The contract "What the platform's slices
share sits below them" (pyproject.toml) keeps the floor from importing any slice.

- `accounts`: the stored users and their org memberships (`UserRepository`), read by
  sign-in, the request's principal, and the users, orgs, access map, notify and
  conversations slices; the users slice (`platform_api.users`) is their HTTP side.
- `principal`: who a request acts as (`Principal`, `OrgScope`), built by `auth` and read
  by every service.
- `capabilities`: the capabilities the platform knows (`DECIDE`, `declare`, `known`).
- `confirmers`: which steps a task's initiating client must confirm (the confirmations
  slice and the tool proxy). The access map's own endpoints and storage are the slice
  `platform_api.access_map`.
- `audit`: the append-only, hash-chained audit log (recording, the chain, verifying,
  signed checkpoints); the slice `platform_api.audit` is its HTTP router and its commands.
"""
