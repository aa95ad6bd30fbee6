"""Pytest wiring shared by every tier.

The `cluster` fixture gives the integration tests a real Kubernetes API server: the
local control plane of `humanwork_dev.cluster` by default (reused when one is already
running, started and later stopped otherwise), or the existing cluster that
`--kubeconfig` or `KUBECONFIG` points at (kind, a real cluster). When neither can be
had, the tests that need it FAIL with the reason; they never skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client, config

from humanwork_dev import cluster as local

PINNED_VERSION = "v1.37.2"

# one of each session fixture for every folder: the stack (resources, operator) and PostgreSQL
pytest_plugins = ["tests.fixtures.database", "tests.fixtures.stack"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--kubeconfig",
        default=None,
        help="run the integration tests on this existing cluster instead of the local one",
    )


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "integration" in Path(str(item.fspath)).parts:
            item.add_marker(pytest.mark.cluster)


@dataclass
class Cluster:
    """A reachable Kubernetes API server and the tools to talk to it."""

    kubeconfig: str
    kubectl_path: str
    local: bool
    api: client.ApiClient
    info: local.ClusterInfo | None = None
    _namespaces: list[str] = field(default_factory=list)

    def kubectl(
        self, *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [self.kubectl_path, *args],
            input=stdin,
            capture_output=True,
            text=True,
            env={**os.environ, "KUBECONFIG": self.kubeconfig},
            check=False,
        )
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr.strip()}")
        return done

    def client_for_token(self, token: str) -> client.ApiClient:
        """An API client that authenticates with a bearer token instead of the admin cert."""
        cfg = client.Configuration()
        cfg.host = self.api.configuration.host
        cfg.ssl_ca_cert = self.api.configuration.ssl_ca_cert
        cfg.verify_ssl = True
        cfg.api_key = {"authorization": f"Bearer {token}"}
        return client.ApiClient(cfg)


@pytest.fixture(scope="session")
def cluster(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    kubeconfig = request.config.getoption("--kubeconfig") or os.environ.get("KUBECONFIG")
    started_here = False
    info: local.ClusterInfo | None = None
    if kubeconfig:
        kubectl = shutil.which("kubectl")
        if not kubectl:
            bin_dir = local.binaries(build=False)
            kubectl = str(bin_dir / "kubectl")
    else:
        try:
            info = local.status()
            if info is None:
                info = local.up()
                started_here = True
        except local.ClusterError as exc:
            pytest.fail(
                f"no Kubernetes control plane for the integration tests: {exc}. "
                "Run `make cluster-up`, or set KUBECONFIG to an existing cluster.",
                pytrace=False,
            )
        kubeconfig = info.kubeconfig
        kubectl = info.kubectl
    try:
        api = config.new_client_from_config(config_file=kubeconfig)
        client.VersionApi(api).get_code()
    except Exception as exc:  # any failure to reach the server is fatal here
        pytest.fail(f"cannot reach the cluster of {kubeconfig}: {exc}", pytrace=False)
    yield Cluster(kubeconfig, kubectl, info is not None, api, info)
    api.close()
    if started_here and not os.environ.get("HUMANWORK_KEEP_CLUSTER"):
        local.down()


@pytest.fixture
def make_namespace(cluster: Cluster) -> Iterator[Callable[..., str]]:
    """Create uniquely named namespaces (with optional labels); delete them afterwards."""
    core = client.CoreV1Api(cluster.api)
    created: list[str] = []

    def make(prefix: str = "t", labels: dict[str, str] | None = None) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels or {}))
        )
        created.append(name)
        return name

    yield make
    for name in created:
        try:
            core.delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise
