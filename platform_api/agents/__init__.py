"""The platform's commands to an org's agents (seed 002 section 4.2), signed per instance."""
