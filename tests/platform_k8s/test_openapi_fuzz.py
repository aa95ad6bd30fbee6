"""schemathesis over the platform API's own OpenAPI document: every operation,
with generated requests (valid and invalid), in all four of its phases (the document's
examples, coverage of each parameter's boundaries, random fuzzing, stateful sequences),
as the admin or an expert of an org, on the embedded default (SQLite, what `make up`
runs) AND on PostgreSQL, both with the real control plane (without it the task and queue
endpoints answer 503). Not one answer may be a server error (5xx).

Each operation is fuzzed by the caller it opens to, as its `x-capability` says: the
expert's run takes those that open to an expert of the org, the admin's (a platform
administrator) those that refuse the expert for who it is (platform administrators only,
agent tokens or signatures only, or capabilities the expert's role does not hold), and the
expert is sent each of these once to see it refused with its code. The fuzzing phase draws
15 requests for an operation with free text in its input, 5 for one without (its
boundaries come from the coverage phase all the same).

Beside the fuzzer, every path, query and header parameter and every top-level body
property is sent a huge integer, an empty string, NUL and non-ASCII text for sure, one at
a time with the rest valid (tests/fuzz/edges.py): a fuzzer reaches them only by chance.

Neither the platform nor the fuzzer may resolve or contact a host that is not local: the
platform resolves upstream names through the test's resolver (none), and an audit hook in
both processes (tests/fuzz/network.py) records any lookup or connection that leaves the
machine; there must be none.

The platform runs as a real HTTP server (uvicorn in a thread, with its lifespan), the
fuzzer as schemathesis's own command line in a process of its own (the other core). What
the fuzzing creates (orgs and their namespaces, users, tasks) is removed afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from kubernetes import client as kclient
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from humanwork_dev.postgres import PostgresServer
from platform_api.app import create_app
from platform_api.auth import passwords
from tests.conftest import Cluster
from tests.fixtures.database import TEMPLATE
from tests.fuzz import edges, network
from tests.fuzz.serve import served
from tests.platform.conftest import ADMIN_PASSWORD, StaticResolver, make_settings

EXAMPLES = 15
"""Generated requests per operation in the fuzzing phase (the coverage phase adds its
boundary cases, the examples phase the document's examples)."""

SCHEMATHESIS = Path(sys.executable).parent / "schemathesis"
ROOT = Path(__file__).resolve().parents[2]
EXPERT_PASSWORD = "fuzz-expert-password-0192"


@dataclass
class Target:
    """The platform under test: its URL, each caller's headers and ids that exist."""

    base: str
    headers: dict[str, dict[str, str]]
    ids: dict[str, str]
    resolver: StaticResolver
    caller: str = "admin"
    timings: dict[str, float] = field(default_factory=dict)
    document: dict[str, Any] = field(default_factory=dict)
    expert_refused: list[str] | None = None
    """What the expert's role refuses, read once, before any admin's run changes the access
    map (see `expert_refused`)."""


async def _org_namespaces(url: str) -> list[str]:
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            return list((await conn.execute(text("select namespace from orgs"))).scalars())
    finally:
        await engine.dispose()


def _login(base: str, username: str, password: str) -> dict[str, str]:
    answer = httpx.post(
        f"{base}/auth/token", json={"username": username, "password": password}, timeout=60
    )
    assert answer.status_code == 200, answer.text
    return {"Authorization": f"Bearer {answer.json()['access_token']}"}


def _seed(base: str) -> tuple[dict[str, dict[str, str]], dict[str, str]]:
    """An org with an expert, a task, a conversation and a document: (headers, ids)."""
    admin = _login(base, "admin", ADMIN_PASSWORD)

    def post(path: str, body: dict[str, object]) -> dict[str, str]:
        answer = httpx.post(f"{base}{path}", json=body, headers=admin, timeout=60)
        assert answer.status_code in (200, 201), answer.text
        made: dict[str, str] = answer.json()
        return made

    org = post("/orgs", {"slug": f"fuzz-{uuid.uuid4().hex[:8]}", "name": "Fuzz"})
    post(
        "/users",
        {
            "username": "fuzz-expert",
            "password": EXPERT_PASSWORD,
            "role": "expert",
            "org_ids": [org["id"]],
        },
    )
    conversation = post(f"/orgs/{org['id']}/conversations", {"subject": "fuzz"})
    document = post(f"/orgs/{org['id']}/knowledge", {"title": "t", "content": "c"})
    task = post(
        "/agentic/tasks",
        {
            "orgId": org["id"],
            "agentRef": "shop",
            "description": "fuzz",
            "conversationId": conversation["id"],
            "steps": [{"id": "a", "description": "d", "tool": "shopify_query", "risk": "low"}],
        },
    )
    namespace, name = task["id"].split("/")
    ids = {
        "org_id": org["id"],
        "org": org["id"],
        "namespace": namespace,
        "name": name,
        "step_id": "a",
        "conversation_id": conversation["id"],
        "document_id": document["id"],
        "username": "fuzz-expert",
        "integration_type": "shopify",
        "tool_name": "shopify",
        "tool": "shopify",
    }
    headers = {"admin": admin, "expert": _login(base, "fuzz-expert", EXPERT_PASSWORD)}
    return headers, ids


class Platforms:
    """The platform of one backend at a time, kept across that backend's callers: the
    expert's runs come first, the admin's after them (see `target`); building one stops
    the other backend's."""

    def __init__(
        self,
        postgres: PostgresServer,
        kubeconfig: Path,
        cluster: Cluster,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> None:
        self.postgres, self.kubeconfig, self.cluster = postgres, kubeconfig, cluster
        self.tmp_path_factory = tmp_path_factory
        self.backend: str | None = None
        self.current: Target | None = None
        self.admin_ran = False
        self.stack = contextlib.ExitStack()

    def of(self, backend: str) -> Target:
        if self.backend != backend or self.current is None:
            self.close()
            self.current = self.stack.enter_context(self._served(backend))
            self.backend = backend
        return self.current

    def close(self) -> None:
        self.stack.close()
        self.backend, self.current, self.admin_ran = None, None, False

    @contextlib.contextmanager
    def _served(self, backend: str) -> Iterator[Target]:
        """The platform served on loopback on `backend`, seeded; removed afterwards."""
        name = f"fuzz_{uuid.uuid4().hex}"
        if backend == "sqlite":
            url = f"sqlite+aiosqlite:///{self.tmp_path_factory.mktemp('fuzz') / 'platform.db'}"
        else:
            url = asyncio.run(self.postgres.create_database(name, template=TEMPLATE))
        resolver = StaticResolver()
        network.install()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(passwords, "N", 2**12)  # cheaper scrypt, as in the other API tests
            # names resolve from the test (none), never from the real network
            settings = make_settings(url, kubeconfig=str(self.kubeconfig))
            app = create_app(settings, resolver=resolver)
            try:
                with served(app) as base:
                    headers, ids = _seed(base)
                    # built on the first request: seconds on a loaded machine, longer than
                    # schemathesis waits for the document (10 s)
                    document = httpx.get(f"{base}/openapi.json", timeout=120).json()
                    yield Target(base, headers, ids, resolver, document=document)
            finally:
                core = kclient.CoreV1Api(self.cluster.api)
                for namespace in asyncio.run(_org_namespaces(url)):
                    try:
                        core.delete_namespace(namespace)
                    except kclient.ApiException as exc:
                        if exc.status != 404:
                            raise
                if backend == "postgresql":
                    asyncio.run(self.postgres.drop_database(name))


@pytest.fixture(scope="module")
def platforms(
    postgres: PostgresServer,
    platform_kubeconfig: Path,
    cluster: Cluster,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Platforms]:
    held = Platforms(postgres, platform_kubeconfig, cluster, tmp_path_factory)
    try:
        yield held
    finally:
        held.close()


# one platform per backend, the expert's runs BEFORE the admin's: the admin's runs replace
# the access map, deactivate users and change roles (usernames are among the ids the fuzzer
# fills in), after which an expert on the same database would only meet 401, 403 and 404.
# pytest runs every test of one parameter of a module fixture before the next parameter,
# in the order of `params`.
@pytest.fixture(
    scope="module",
    params=[(db, who) for db in ("sqlite", "postgresql") for who in ("expert", "admin")],
    ids=lambda param: "-".join(param),
)
def target(request: pytest.FixtureRequest, platforms: Platforms) -> Target:
    """The platform served on loopback on the backend of the parameter, as its caller."""
    backend, who = request.param
    shared = platforms.of(backend)
    if who == "expert":
        # the expert as seeded: nothing ran as the admin on this platform yet
        assert not platforms.admin_ran, "the admin's runs came before the expert's"
    else:
        platforms.admin_ran = True
    return dataclasses.replace(shared, caller=who)


EXTENSION = "x-capability"
FEW_EXAMPLES = 5
"""Generated requests per operation in the fuzzing phase for an operation with no free
text anywhere in its input (ids, numbers, enums, patterns): the coverage phase already
sends each of its parameters' boundary values, and random draws of such input repeat."""


def operations_of(document: dict[str, Any]) -> Iterator[dict[str, Any]]:
    for methods in document["paths"].values():
        yield from methods.values()


def refusing_the_caller(document: dict[str, Any], capabilities: set[str]) -> list[str]:
    """The operation ids of `document` that a caller holding `capabilities` (and not a
    platform administrator) is refused for who it is, whatever it sends: those whose
    `x-capability` names none of them (a role's capability, `platform:admin` or an
    agent's credential; without it the operation opens to any user)."""
    return [
        operation["operationId"]
        for operation in operations_of(document)
        if EXTENSION in operation and not set(operation[EXTENSION]) & capabilities
    ]


def _resolve(document: dict[str, Any], node: Any) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        for part in node["$ref"].removeprefix("#/").split("/"):
            document = document[part]
        node = document
    return node


def has_free_text(document: dict[str, Any], node: Any, depth: int = 0) -> bool:
    """Whether a string with no enum, pattern or format, or a free-form object or value,
    is anywhere in `node` (a schema, or a list or mapping of them)."""
    node = _resolve(document, node)
    if depth > 30 or node is None:
        return False
    if isinstance(node, list):
        return any(has_free_text(document, item, depth + 1) for item in node)
    if not isinstance(node, dict) or node == {}:
        return node == {}
    if node.get("type") == "string":
        return not {"enum", "const", "pattern", "format"} & node.keys()
    if node.get("type") == "object" and not node.get("properties"):
        return node.get("additionalProperties") is not False
    nested = [node.get(key) for key in ("items", "anyOf", "oneOf", "allOf")]
    nested += list((node.get("properties") or {}).values())
    extra = node.get("additionalProperties")
    nested += [extra] if isinstance(extra, dict) else []
    return any(has_free_text(document, item, depth + 1) for item in nested if item is not None)


def without_free_text(document: dict[str, Any]) -> list[str]:
    """The operation ids whose parameters and JSON body have no free text."""
    found = []
    for operation in operations_of(document):
        schemas = [parameter.get("schema") for parameter in operation.get("parameters", [])]
        content = (operation.get("requestBody") or {}).get("content") or {}
        schemas += [media.get("schema") for media in content.values()]
        if not has_free_text(document, schemas):
            found.append(operation["operationId"])
    return found


def expert_refused(target: Target) -> list[str]:
    """The operations that refuse the seeded expert for who it is (its capabilities as
    `/users/me` reports them), read at the first call: the admin's runs change the access
    map, and with it what the expert holds, after that."""
    if target.expert_refused is not None:
        return target.expert_refused
    me = httpx.get(f"{target.base}/users/me", headers=target.headers["expert"], timeout=60)
    assert me.status_code == 200, me.text
    capabilities = set(me.json()["capabilities"])
    assert capabilities and "access.manage" not in capabilities, capabilities
    refused = refusing_the_caller(target.document, capabilities)
    operations = len(list(operations_of(target.document)))
    # the expert still meets most of the document: the tasks, the queue, the conversations
    assert 10 < len(refused) < operations - 30, refused
    target.expert_refused = refused
    return refused


def selection(target: Target, caller: str) -> list[str]:
    """Each operation is fuzzed by the caller it opens to: the expert's run takes those
    that open to the expert, the admin's those that refuse the expert (the platform
    administrator reaches them; the agents' own refuse it too and are fuzzed for their
    input all the same). Each refusal of the expert is checked once beside them
    (`test_the_expert_is_refused_what_its_role_does_not_hold`)."""
    refused = expert_refused(target)
    if caller == "expert":
        return [f"--exclude-operation-id={operation_id}" for operation_id in refused]
    return [f"--include-operation-id={operation_id}" for operation_id in refused]


def write_config(target: Target, folder: Path) -> None:
    """`schemathesis.toml` in the run's folder: fewer fuzzing examples for the operations
    without free text."""
    few = json.dumps(without_free_text(target.document))
    (folder / "schemathesis.toml").write_text(
        f"[[operations]]\ninclude-operation-id = {few}\ngeneration.max-examples = {FEW_EXAMPLES}\n"
    )


def run_schemathesis(target: Target, caller: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """schemathesis's command line over the served document, as `caller`, over the
    operations that caller fuzzes (`selection`)."""
    (auth,) = target.headers[caller].items()
    write_config(target, folder)
    log = folder / "network.log"
    return subprocess.run(
        [
            str(SCHEMATHESIS),
            "run",
            f"{target.base}/openapi.json",
            "--phases=examples,coverage,fuzzing,stateful",
            f"--max-examples={EXAMPLES}",
            "--checks=not_a_server_error",
            f"--header={auth[0]}: {auth[1]}",
            "--generation-database=none",
            "--generation-allow-x00=true",
            "--generation-codec=utf-8",
            "--seed=18",
            # one worker: Python 3.11's ast constructor keeps its recursion depth per
            # interpreter, not per thread, and hypothesis parses its filters' lambdas while
            # describing them, so two workers fail at random with "AST constructor recursion
            # depth mismatch" (CPython gh-106905), an error of the fuzzer, not of the API
            "--workers=1",
            "--request-timeout=30",
            # the live event streams never end: their own tests cover them (test_notify.py,
            # test_clients_stream.py)
            "--exclude-path=/human-tasks/events",
            "--exclude-path=/orgs/{org_id}/conversations/{conversation_id}/events",
            *selection(target, caller),
            "--suppress-health-check=all",
            "--no-color",
        ],
        env={
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "SCHEMATHESIS_HOOKS": "tests.fuzz.hooks",
            "FUZZ_IDS": json.dumps(target.ids),
            "FUZZ_NETWORK_LOG": str(log),
        },
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )


@pytest.fixture
def caller(target: Target) -> str:
    """Who the test calls as: the admin or the org's expert, each on a platform of its own."""
    return target.caller


def selected(target: Target, caller: str) -> dict[str, Any]:
    """The document with only the operations `caller` fuzzes (see `selection`)."""
    refused = set(expert_refused(target))
    paths: dict[str, Any] = {}
    for path, methods in target.document["paths"].items():
        for method, operation in methods.items():
            if (operation["operationId"] in refused) == (caller == "admin"):
                paths.setdefault(path, {})[method] = operation
    return {**target.document, "paths": paths}


def test_edge_values_reach_every_parameter_without_a_server_error(
    target: Target, caller: str
) -> None:
    network.reset()
    document = selected(target, caller)
    with httpx.Client(base_url=target.base, headers=target.headers[caller], timeout=60) as http:
        statuses, errors = edges.send_edges(http, document, target.ids)
    assert statuses.total() > 250, statuses
    # valid but for the one edge value: many pass validation and reach the handlers
    assert sum(n for status, n in statuses.items() if status != 422) > 60, statuses
    assert sum(n for status, n in statuses.items() if status < 300) > 2, statuses
    assert errors == [], "\n".join(errors[:20])
    if caller == "expert":  # before any admin's run changed what the expert holds
        assert_the_expert_is_refused(target)
    assert network.foreign() == [], "the platform's process left the machine"


REFUSALS = {
    401: {"unauthenticated", "signature_refused"},  # an agent's token or signature needed
    403: {"forbidden", "platform_admin_required"},
}
HIDDEN_USER = "/users/{username}/"
"""Where a user the caller may not manage answers 404 `not_found`: its existence is not
told (the check runs in the service, after the dependencies)."""


def assert_the_expert_is_refused(target: Target) -> None:
    """Once per operation the expert's fuzzing leaves out: a valid request but for who
    sends it answers 401 (an agent's credential needed), 403 (404 for a user it may not
    manage), each with its code. The
    admin's runs then drive the same operations past their checks (the edge test counts
    answers that are not refusals)."""
    document = selected(target, "admin")
    operations = {op["operationId"] for op in operations_of(document) if not edges.is_stream(op)}
    seen = []
    with httpx.Client(base_url=target.base, headers=target.headers["expert"], timeout=60) as http:
        for request in edges.valid_requests(document, target.ids):
            answer = http.request(
                request.method.upper(),
                request.url(),
                params={k: str(v) for k, v in request.query.items()},
                json=request.body,
            )
            refusals = dict(REFUSALS)
            if request.path.startswith(HIDDEN_USER):
                refusals[404] = {"not_found"}
            assert answer.status_code in refusals, (request.what, answer.text)
            assert answer.json()["code"] in refusals[answer.status_code], answer.text
            seen.append(request.what)
    assert len(seen) == len(operations) > 10, seen


# after the edge values of the same caller: an admin's fuzzing replaces the access map and
# deactivates users, after which the edge values would meet only refusals
def test_no_operation_answers_a_server_error(target: Target, caller: str, tmp_path: Path) -> None:
    network.reset()
    started = time.monotonic()
    done = run_schemathesis(target, caller, tmp_path)
    print(f"schemathesis as {caller}: {time.monotonic() - started:.0f} s")
    (tmp_path / "schemathesis.txt").write_text(done.stdout + done.stderr)
    if os.environ.get("FUZZ_KEEP"):
        Path(os.environ["FUZZ_KEEP"], f"{caller}.txt").write_text(done.stdout + done.stderr)
    summary = done.stdout[-6000:]
    assert done.returncode == 0, summary + done.stderr[-2000:]
    assert "operations" in done.stdout.lower() or "Tested" in done.stdout, summary
    fuzzer_network = (tmp_path / "network.log").read_text().split("\n")
    assert [line for line in fuzzer_network if line] == []
    assert network.foreign() == [], "the platform's process left the machine"
