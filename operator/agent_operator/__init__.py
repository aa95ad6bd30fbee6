"""The humanwork kopf operator (import package `agent_operator`; its folder is `operator/`,
because a top-level package named `operator` would shadow Python's standard library)."""
