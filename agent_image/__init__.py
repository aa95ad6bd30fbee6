"""The per-org agent runtime that runs in the agent pods."""
