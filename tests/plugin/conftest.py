"""Fixtures of the kubectl plugin's tests: the platform API as a real HTTP process on the
real control plane and PostgreSQL (with the operator), and a fresh org per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from humanwork_dev.processes import PlatformProcess
from tests.browser.support import Org, org_fixture
from tests.conftest import Cluster


@pytest.fixture
def org(platform_server: PlatformProcess, cluster: Cluster) -> Iterator[Org]:
    yield from org_fixture(platform_server, cluster)
