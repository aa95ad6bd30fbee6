"""Org deactivation and reactivation (UC-20), and what holds it: one slice.

- `router`, `service`, `schemas`: `POST /orgs/{org_id}/deactivate|reactivate`.
- `repository`: the org's active flag (`orgs.deactivated_at`), read from the database on
  every check (never cached), so a deactivation holds on every replica at once;
  `ensure_active` for the endpoints that name their org in the body (tasks, decisions,
  conversations), `deactivated_now` for the agent API.
- `guard`: the app-wide dependency that refuses a deactivated org's new work.

The flag and the guard share the slice's name rather than sit on a floor of their own:
the slices that read the flag (`tasks`, `human_tasks`, `conversations`, `agent_api`) are
imported by nothing here, so no cycle asks for a lower floor.
"""
