"""Constants of the integration tests; their session fixtures (`installed`, `operator`)
live in tests/fixtures/stack.py, a plugin of the root conftest, so that every test folder
shares one of each."""

from tests.fixtures.stack import REPO, TASK_TTL_SECONDS

__all__ = ["REPO", "TASK_TTL_SECONDS"]
