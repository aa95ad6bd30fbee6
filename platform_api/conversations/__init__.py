"""Conversations and their messages, kept for an org: what agents read as context and
what the review queue shows (redacted) next to a task."""
