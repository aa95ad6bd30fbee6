"""The review queue: every decision waiting on a human, from a watch-fed index."""
