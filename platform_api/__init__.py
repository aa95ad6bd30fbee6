"""The humanwork platform API (FastAPI): experts, decisions, the review queue, audit and
the agent-facing tool proxy."""
