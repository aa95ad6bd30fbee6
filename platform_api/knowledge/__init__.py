"""An org's knowledge documents: what its agents search through `GET /v1/agent-api/context`."""
