"""The revision loop (seed 000): when an expert rejects a step with
feedback, the platform asks the task's agent for a revised plan (a new AgenticTask with
`spec.revisionOf`), at most `HUMANWORK_REVISION_LIMIT` times per request."""
