"""An AgentInstance's agent runs as a local process with exactly what its pod gives it
(simulated nodes run no containers): its token, HMAC key and configuration as files, its
LLM key from the referenced Secret, and nothing else: no database URL, no third-party
credential. It reports the configuration hash the operator published."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kubernetes import client

from humanwork_dev.runagent import Materialised, materialise, start
from tests.agents import LLM_KEY
from tests.conftest import Cluster
from tests.support import eventually

FORBIDDEN = ("DATABASE", "POSTGRES", "REDIS", "SHOPIFY", "AMAZON", "KUBECONFIG")


@pytest.fixture
def agent(
    cluster: Cluster, ready_agent: tuple[str, str], tmp_path: Path
) -> Iterator[tuple[str, Materialised, int]]:
    ns, _ = ready_agent
    spec = materialise(cluster.api, ns, "agent", tmp_path / "pod")
    proc = start(spec, tmp_path / "agent.log")
    try:
        yield ns, spec, proc.pid
    finally:
        proc.terminate()
        proc.wait(10)


def test_the_agent_process_has_its_pod_and_nothing_more(
    cluster: Cluster, agent: tuple[str, Materialised, int]
) -> None:
    ns, spec, pid = agent

    def healthy() -> dict[str, str] | None:
        try:
            answer = httpx.get(f"http://127.0.0.1:{spec.port}/v1/health", timeout=2)
        except httpx.HTTPError:
            return None
        return dict(answer.json()) if answer.status_code == 200 else None

    health = eventually(healthy, timeout=30)
    instance = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "humanwork.io", "v1alpha1", ns, "agentinstances", "agent"
    )
    assert health["configHash"] == instance["status"]["configHash"]

    # the process's real environment, as the kernel holds it
    environ = dict(
        item.split("=", 1)
        for item in Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
        if "=" in item
    )
    for name, value in environ.items():
        for word in FORBIDDEN:
            assert word not in name.upper() and word not in value.upper(), name
    assert environ["HUMANWORK_LLM_API_KEY"] == LLM_KEY
    assert environ["HUMANWORK_ORG_ID"] == instance["spec"]["orgId"]
    # the token file is the operator's token Secret, mounted as the pod would have it
    secret = client.CoreV1Api(cluster.api).read_namespaced_secret("agent-agent-token", ns)
    token_file = Path(environ["HUMANWORK_TOKEN_FILE"])
    assert token_file.read_bytes() == base64.b64decode(secret.data["token"])
    assert token_file.is_relative_to(spec.root)
