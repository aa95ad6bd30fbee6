"""Expert corrections (seed 002 UC-21, UC-23): what experts changed in an
agent's draft reply or plan, kept per org on the platform and pushed to the org's agents."""
