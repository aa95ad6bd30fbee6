"""The router: a request that names no agent goes to the org's agent whose
specialist fits (`POST /orgs/{org_id}/tasks`)."""
