"""The humanwork platform API (FastAPI): experts, decisions, the review queue, the clients'
side, audit and the agent-facing tool proxy.

Layout: feature folders, each a slice with one name and router -> service -> repository
(plus schemas) where it has them; the import contracts in pyproject.toml hold every slice
(and `floor.audit`) to that order and keep what the slices share below them, free of the
slices: the shared floor `floor` (the stored accounts, the principal, the capabilities,
the confirmers, the audit log), `db`, `privileges`, and `steps` (every move of a step).
Shared modules: `app.create_app` (the composition root), `settings`, `db` (engine,
migrations, the transaction-owning session dependency), `models`, `errors` (the one error
shape), `slots` (a shared object's one dependency provider, filled by the composition
root), `state` (the floor's slots: settings, Kubernetes client, metrics, the agents' HTTP
client). The slices are the other folders; each one's `__init__` docstring says its role.
Run with `humanwork-platform` (see `main`).
"""
