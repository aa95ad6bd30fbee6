"""The humanwork platform API (FastAPI): experts, decisions, the review queue, audit and
the agent-facing tool proxy.

Layout (feature folders, each with router -> service -> repository, plus schemas):
`auth` (login, tokens, the principal and capability dependencies), `orgs` (with the
`OrgNamespaces` seam to Kubernetes), `users`, `access` (the access map), `tools` (tool
permissions), `integrations` (AES-256-GCM credentials), `audit` (hash-chained log, verify
command), `health`. Shared: `app.create_app`, `settings`, `db` (engine, migrations, the
transaction-owning session dependency), `models`, `errors` (the one error shape), `state`.
Run with `humanwork-platform` (see `main`).
"""
