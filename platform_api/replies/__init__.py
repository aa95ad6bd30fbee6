"""Draft replies to conversations (seed 002 UC-1, UC-2, UC-4): the org's
agent drafts, the platform sends a confident draft at once and queues the rest for an
expert (kind `reply` in `/human-tasks`)."""
