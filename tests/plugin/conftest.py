"""Fixtures of the kubectl plugin's tests: the platform API as a real HTTP process on the
real control plane and PostgreSQL (with the operator), and a fresh org per test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import OperatorProcess, PlatformProcess
from tests.browser.support import Org, org_fixture, start_platform
from tests.conftest import Cluster


@pytest.fixture(scope="session")
def plugin_server(
    cluster: Cluster,
    installed: None,
    operator: OperatorProcess,
    postgres: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[PlatformProcess]:
    yield from start_platform(cluster, postgres, tmp_path_factory.mktemp("platform-plugin"))


@pytest.fixture
def org(plugin_server: PlatformProcess, cluster: Cluster) -> Iterator[Org]:
    yield from org_fixture(plugin_server, cluster)
