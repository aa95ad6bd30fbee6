"""schemathesis over the platform API's own OpenAPI document: every operation, with
generated requests (valid and invalid), authenticated as the admin, against a real
PostgreSQL and the real control plane (the task and queue endpoints need it: without it
they answer 503). Not one answer may be a server error (5xx). The number of examples per
operation is bounded so that the whole run stays under about a minute.

The platform runs as a real HTTP server (uvicorn in a thread, with its lifespan), so that
schemathesis sends real requests; what the fuzzing creates (orgs and their namespaces,
users, tasks) is removed with the module's database afterwards.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, given, settings
from kubernetes import client as kclient
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from humanwork_dev.postgres import PostgresServer
from humanwork_dev.processes import free_port
from platform_api.app import create_app
from platform_api.auth import passwords
from tests.conftest import Cluster
from tests.fixtures.database import TEMPLATE
from tests.platform.conftest import ADMIN_PASSWORD, StaticResolver, make_settings

EXAMPLES = 25
"""Generated requests per operation (each operation also gets its explicit examples)."""


async def _org_namespaces(url: str) -> list[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text("select namespace from orgs"))).scalars())
    finally:
        await engine.dispose()


@pytest.fixture(scope="module")
def fuzz_server(
    postgres: PostgresServer, platform_kubeconfig: Path, cluster: Cluster
) -> Iterator[tuple[str, dict[str, str]]]:
    """(base URL, admin headers) of the platform served on loopback."""
    name = f"fuzz_{uuid.uuid4().hex}"
    url = asyncio.run(postgres.create_database(name, template=TEMPLATE))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(passwords, "N", 2**12)  # cheaper scrypt, as in the other API tests
        # names resolve from the test (none), never from the real network
        app = create_app(
            make_settings(url, kubeconfig=str(platform_kubeconfig)), resolver=StaticResolver()
        )
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
        )
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 60
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "the platform did not start"
            time.sleep(0.05)
        base = f"http://127.0.0.1:{port}"
        try:
            token = httpx.post(
                f"{base}/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD}
            ).json()["access_token"]
            headers = {"Authorization": f"Bearer {token}"}
            # something to find: an org (its namespace), a task, a conversation
            org = httpx.post(
                f"{base}/orgs", json={"slug": "fuzz", "name": "Fuzz"}, headers=headers
            ).json()["id"]
            httpx.post(
                f"{base}/agentic/tasks",
                json={
                    "orgId": org,
                    "agentRef": "shop",
                    "description": "fuzz",
                    "steps": [{"id": "a", "description": "d", "tool": "t", "risk": "low"}],
                },
                headers=headers,
            ).raise_for_status()
            yield base, headers
        finally:
            server.should_exit = True
            thread.join(30)
            core = kclient.CoreV1Api(cluster.api)
            for namespace in asyncio.run(_org_namespaces(url)):
                try:
                    core.delete_namespace(namespace)
                except kclient.ApiException as exc:
                    if exc.status != 404:
                        raise
            asyncio.run(postgres.drop_database(name))


@pytest.fixture(scope="module")
def fuzz_schema(fuzz_server: tuple[str, dict[str, str]]) -> schemathesis.BaseSchema:
    base, _ = fuzz_server
    return schemathesis.openapi.from_url(f"{base}/openapi.json")


@pytest.fixture(scope="module")
def admin_headers(fuzz_server: tuple[str, dict[str, str]]) -> dict[str, str]:
    return fuzz_server[1]


def test_no_operation_answers_a_server_error(
    fuzz_schema: schemathesis.BaseSchema, admin_headers: dict[str, str]
) -> None:
    failures: list[str] = []
    operations = 0
    for result in fuzz_schema.get_all_operations():
        operation = result.ok()
        operations += 1

        @given(case=operation.as_strategy())
        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            suppress_health_check=list(HealthCheck),
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],
        )
        def fuzz(case: schemathesis.Case) -> None:
            case.call_and_validate(headers=admin_headers, checks=[not_a_server_error], timeout=30)

        try:
            fuzz()
        except FailureGroup as exc:  # schemathesis's failures, each with a curl to reproduce
            failures.append(f"{operation.label}: {exc}")
    assert operations >= 30
    assert not failures, "\n\n".join(failures[:10])
