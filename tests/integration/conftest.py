"""Fixtures shared by the integration tests: the humanwork resources installed as users
install them, and the operator running as a process under its own ServiceAccount."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from humanwork_dev.processes import OperatorProcess
from tests.conftest import Cluster

REPO = Path(__file__).resolve().parents[2]
TASK_TTL_SECONDS = 3


@pytest.fixture(scope="session")
def installed(cluster: Cluster) -> None:
    """CRDs, admission policies and the operator's RBAC, installed as users install them."""
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    for crd in ("agentinstances.humanwork.io", "agentictasks.humanwork.io"):
        cluster.kubectl("wait", "--for=condition=Established", f"crd/{crd}", "--timeout=60s")
    cluster.kubectl("apply", "-k", str(REPO / "manifests/base/policies"))
    cluster.kubectl("apply", "-k", str(REPO / "manifests/base/operator"))
    cluster.kubectl("apply", "-k", str(REPO / "manifests/base/platform"))


@pytest.fixture(scope="session")
def operator(
    cluster: Cluster, installed: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[OperatorProcess]:
    proc = OperatorProcess(
        cluster.kubeconfig,
        cluster.kubectl_path,
        tmp_path_factory.mktemp("operator"),
        env={"HUMANWORK_OPERATOR_TASK_TTL_SECONDS": str(TASK_TTL_SECONDS)},
    )
    proc.start()
    yield proc
    proc.stop()
    print(proc.tail(80))
