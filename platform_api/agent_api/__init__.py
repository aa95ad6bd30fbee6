"""The agent-facing API: authenticated by the agent's token only."""
