"""Shared core of humanwork-operator: resource models, the task state machine, token and
signature helpers. Imported by the operator, the platform API and the agent; it imports
no kopf, FastAPI or Kubernetes client."""
