"""Least privilege, checked from the API server's own audit log: every request the
operator and the platform API made was allowed, and every permission their roles grant
was used.

The local control plane logs (at Metadata level) every request of the humanwork-system
ServiceAccounts. For the operator, this module drives one whole AgentInstance and
AgenticTask lifecycle (the rest of the session adds more) and compares what it did with
manifests/base/operator/rbac.yaml. For the platform API, it runs the platform as a
process under the humanwork-platform-api ServiceAccount's own token (its requests are
told apart from the tests' by the token's id, which the API server records), drives
every Kubernetes call the platform's code makes, and compares the requests with
manifests/base/platform/rbac.yaml both ways, down to the namespace and the object names
of its Role. A third list, the calls platform_api/kube/client.py can make (each of its
methods run once over a lean client that records its requests), makes sure the scenario
leaves none of them out.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import ssl
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from kubernetes import client

from agent_operator.builders import AGENT_RBAC_RULES
from agent_operator.kube import USER_AGENT
from humanwork_core import signing, taskflow
from humanwork_core.kube_client import Kube as LeanKube
from humanwork_core.kube_client import resource_of
from humanwork_core.resources import Verdict
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess, PlatformProcess
from platform_api.kube import client as kube_client
from tests.agents import (
    GROUP,
    PLURAL,
    VERSION,
    agent_credentials,
    create_instance,
    get_instance,
    instance_manifest,
    provision_agent,
    wait_phase,
    wait_rotated,
)
from tests.conftest import Cluster
from tests.integration.conftest import REPO
from tests.integration.test_tasks import Writer, approve, create_task, task_manifest, wait_task
from tests.support import eventually, service_account_token

OPERATOR_USER = f"system:serviceaccount:{PLATFORM_NS}:humanwork-operator"
PLATFORM_USER = f"system:serviceaccount:{PLATFORM_NS}:humanwork-platform-api"
PLATFORM_RBAC = REPO / "manifests/base/platform/rbac.yaml"
ORG_SECRETS = "humanwork-operator-org-secrets"
ORG_SECRETS_BINDING = "humanwork-operator-secrets"
KEY_SECRETS = ("humanwork-agent-signing-keys", "humanwork-callback-key")
RBAC_GROUP = "rbac.authorization.k8s.io"
Permission = tuple[str, str, str]  # (apiGroup, resource[/subresource], verb)


@dataclass(frozen=True)
class Grant:
    """One (apiGroup, resource, verb) of a rule, where it applies (None: every namespace,
    from a ClusterRole) and to which objects (empty: all)."""

    group: str
    resource: str
    verb: str
    namespace: str | None = None
    names: frozenset[str] = frozenset()

    def allows(self, request: Request) -> bool:
        return (
            (self.group, self.resource, self.verb)
            == (request.group, request.resource, request.verb)
            and (self.namespace is None or self.namespace == request.namespace)
            and (not self.names or request.name in self.names)
        )


@dataclass(frozen=True)
class Request:
    """A request as the audit log records it."""

    group: str
    resource: str
    verb: str
    namespace: str | None
    name: str | None

    @property
    def permission(self) -> Permission:
        return (self.group, self.resource, self.verb)


def rbac_grants(rbac_file: Path, role: str) -> set[Grant]:
    """Every grant of the ClusterRole and the Roles named `role` in `rbac_file`."""
    found: set[Grant] = set()
    for doc in yaml.safe_load_all(rbac_file.read_text()):
        if not doc or doc["kind"] not in ("ClusterRole", "Role"):
            continue
        if doc["metadata"]["name"] != role:
            continue
        namespace = doc["metadata"]["namespace"] if doc["kind"] == "Role" else None
        for rule in doc["rules"]:
            names = frozenset(rule.get("resourceNames", ()))
            found |= {
                Grant(group, resource, verb, namespace, names)
                for group in rule["apiGroups"]
                for resource in rule["resources"]
                for verb in rule["verbs"]
            }
    if not found:
        raise AssertionError(f"no ClusterRole or Role {role} in {rbac_file}")
    return found


def granted(rbac_file: Path, role: str) -> set[Permission]:
    return {(g.group, g.resource, g.verb) for g in rbac_grants(rbac_file, role)}


def audit_requests(
    audit_log: Path, user: str, keep: Callable[[dict[str, Any]], bool]
) -> tuple[list[Request], list[dict[str, Any]]]:
    """The requests of `user` that `keep` selects (the tests also act under the platform's
    and the operator's identities, to check the admission policies), and those RBAC
    refused."""
    seen: list[Request] = []
    refused: list[dict[str, Any]] = []
    for line in audit_log.read_text().splitlines():
        entry = json.loads(line)
        if entry.get("user", {}).get("username") != user or "objectRef" not in entry:
            continue
        if not keep(entry):
            continue
        if entry.get("annotations", {}).get("authorization.k8s.io/decision") == "forbid":
            refused.append(entry)  # RBAC said no (admission refusals are another matter)
            continue
        ref = entry["objectRef"]
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource += "/" + ref["subresource"]
        group, verb = ref.get("apiGroup", ""), entry["verb"]
        namespace, name = ref.get("namespace"), ref.get("name")
        seen.append(Request(group, resource, verb, namespace, name))
        code = entry.get("responseStatus", {}).get("code", 0)
        if verb == "patch" and code == 201:  # a server-side apply that created the object
            seen.append(Request(group, resource, "create", namespace, name))
    return seen, refused


def _describe(refused: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [
        (e["verb"], e["objectRef"], e.get("responseStatus", {}).get("message")) for e in refused
    ][:5]


def _audit_log(cluster: Cluster) -> Path:
    """The API server's audit log, once it holds every request made before this call: a
    marker request (by the namespace's `default` ServiceAccount, which the policy logs and
    no check here reads as the operator's or the platform's) is in it."""
    assert cluster.info is not None
    path = Path(cluster.info.state_dir) / "logs" / "audit.log"
    marker = f"audit-mark-{uuid.uuid4().hex[:12]}"
    token = service_account_token(cluster.api, PLATFORM_NS, "default", seconds=600)
    settings = cluster.api.configuration
    trust = ssl.create_default_context(cafile=settings.ssl_ca_cert)
    with httpx.Client(verify=trust, timeout=10) as http:
        answer = http.get(
            f"{settings.host}/api/v1/namespaces/{PLATFORM_NS}/configmaps/{marker}",
            headers={"Authorization": f"Bearer {token}"},
        )
    assert answer.status_code == 403, answer.text  # refused, and logged
    eventually(lambda: marker in path.read_text(), timeout=30)
    return path


# --- the operator ----------------------------------------------------------------------------


def drive_a_whole_lifecycle(cluster: Cluster, ns: str, org_id: str) -> None:
    core, objects = client.CoreV1Api(cluster.api), client.CustomObjectsApi(cluster.api)
    # autoscaled: the operator raises replicas to minReplicas through the scale subresource
    create_instance(cluster, ns, org_id, autoscaling={"minReplicas": 2, "maxReplicas": 2})
    eventually(lambda: get_instance(cluster, ns)["spec"]["replicas"] == 2, timeout=20)
    first = wait_phase(cluster, ns, "Ready")["status"]["token"]["jti"]
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "agent",
        {"metadata": {"annotations": {"humanwork.io/rotate-token": "now"}}},
    )
    wait_rotated(cluster, ns, first, timeout=20)
    core.delete_namespaced_service("agent-agent", ns)
    eventually(lambda: core.read_namespaced_service("agent-agent", ns), timeout=15)
    platform = Writer(cluster, PLATFORM_NS, "humanwork-platform-api", taskflow.Writer.PLATFORM_API)
    name = create_task(cluster, task_manifest(ns, org_id))
    task = wait_task(cluster, ns, name, lambda t: t.current_status().phase is not None)
    approve(platform, task, "read", Verdict.REJECT)
    wait_task(cluster, ns, name, lambda t: t.current_status().phase == "Rejected")
    objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "agentictasks",
        name,
        {"metadata": {"annotations": {"humanwork.io/archived": "now"}}},
    )
    eventually(lambda: not _tasks(cluster, ns), timeout=20)
    read_a_namespace_the_watch_no_longer_shows(cluster, ns, org_id)
    objects.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "agent")
    eventually(lambda: _gone(lambda: get_instance(cluster, ns)), timeout=20)


def read_a_namespace_the_watch_no_longer_shows(cluster: Cluster, ns: str, org_id: str) -> None:
    """The operator's one read of a namespace (`get`): its watch sees org namespaces only, so
    one whose org label is taken away leaves it, and the instance's reconcile reads the
    namespace itself. The refusal it then writes names the missing label, which only that
    read could show; the label put back, the instance is Ready again."""
    core = client.CoreV1Api(cluster.api)
    core.patch_namespace(ns, [{"op": "remove", "path": "/metadata/labels/humanwork.io~1org-id"}])

    def refused() -> bool:
        conditions = (get_instance(cluster, ns).get("status") or {}).get("conditions") or []
        ready = next((c for c in conditions if c["type"] == "Ready"), {})
        return bool(ready.get("reason") == "NamespaceNotAnOrg")

    eventually(refused, timeout=20)
    core.patch_namespace(ns, {"metadata": {"labels": {"humanwork.io/org-id": org_id}}})
    wait_phase(cluster, ns, "Ready")


def _gone(read: Callable[[], Any]) -> bool:
    try:
        read()
    except client.ApiException as exc:
        return bool(exc.status == 404)
    return False


def _tasks(cluster: Cluster, ns: str) -> list[dict[str, Any]]:
    listed: Any = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        GROUP, VERSION, ns, "agentictasks"
    )
    return list(listed["items"])


def test_the_operator_uses_exactly_the_permissions_it_is_granted(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    if not cluster.info:
        pytest.skip("the API server's audit log is read on the local control plane only")
    ns, org_id = org
    drive_a_whole_lifecycle(cluster, ns, org_id)
    requests, refused = audit_requests(
        _audit_log(cluster),
        OPERATOR_USER,
        # this session's operator process (its token's id): not an earlier run's, whose
        # requests a reused control plane's audit log also holds
        lambda entry: (
            entry.get("userAgent", "").startswith((USER_AGENT, "kopf/"))
            and entry["user"].get("extra", {}).get("authentication.kubernetes.io/credential-id")
            == [f"JTI={token_id(operator.kubeconfig)}"]
        ),
    )
    seen = {r.permission for r in requests}
    # the one refusal the operator expects and retries: reading a Secret of an org namespace
    # in the moment between creating its RoleBinding there and the authorizer seeing it
    refused = [
        e
        for e in refused
        if not (
            e["verb"] == "get"
            and e["objectRef"].get("resource") == "secrets"
            and e["objectRef"].get("namespace") not in (PLATFORM_NS, "default", "kube-system")
        )
    ]

    assert not refused, _describe(refused)
    rbac_file = REPO / "manifests/base/operator/rbac.yaml"
    grants = granted(rbac_file, "humanwork-operator") | granted(rbac_file, ORG_SECRETS)
    # `bind` is checked when it writes its RoleBinding to that ClusterRole, not requested
    if any(r.resource == "rolebindings" and r.name == ORG_SECRETS_BINDING for r in requests):
        seen.add((RBAC_GROUP, "clusterroles", "bind"))
    # its Secrets: its key material in humanwork-system, by name, and org namespaces
    for r in requests:
        if r.resource != "secrets":
            continue
        assert r.verb not in ("list", "watch"), r
        assert r.namespace not in ("default", "kube-system", "kube-public"), r
        if r.namespace == PLATFORM_NS:
            assert r.name in KEY_SECRETS or (r.verb == "create" and not r.name), r
    # every call it made is covered by a grant (no wildcard, no cluster-admin shortcut)
    assert seen <= grants, sorted(seen - grants)
    # and every grant was used, or is held only to be granted to agents (Kubernetes
    # refuses a Role that grants more than its creator holds): nothing "just in case"
    delegated = {
        (group, resource, verb)
        for rule in AGENT_RBAC_RULES
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }
    assert grants <= seen | delegated, sorted(grants - seen - delegated)
    # the namespace read among them is the one the lifecycle drove, not one timing allowed
    assert any(r.permission == ("", "namespaces", "get") and r.name == ns for r in requests)
    assert delegated <= grants  # the operator could not create the agents' Roles otherwise


# --- the platform API ------------------------------------------------------------------------

_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


class _Recorder(LeanKube):
    """The lean client with no server: it records the (apiGroup, resource, verb) of every
    request it is asked to make and answers an empty object."""

    def __init__(self) -> None:
        self.seen: set[Permission] = set()
        self.field_manager = kube_client.FIELD_MANAGER

    def _record(self, method: str, path: str) -> None:
        parts = path.strip("/").split("/")
        group = "" if parts[0] == "api" else parts[1]
        resource = resource_of(path)
        collection = parts[-1] == resource.split("/")[0]
        verb = _VERBS.get(method) or ("list" if collection else "get")
        self.seen.add((group, resource, "watch" if method == "WATCH" else verb))

    async def call(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        self._record(method, path)
        data = base64.b64encode(b"v").decode()
        return {"metadata": {"resourceVersion": "1"}, "items": [], "data": {"k": data}}

    async def stream(self, path: str, *_: Any) -> AsyncIterator[dict[str, Any]]:
        self._record("WATCH", path)
        for event in ():
            yield event

    async def stream_lines(self, path: str, *_: Any) -> AsyncIterator[bytes]:
        self._record("WATCH", path)
        for line in ():
            yield line


async def _every_call(kube: kube_client.KubeClient) -> None:
    """Every public method of the platform's client, once, with placeholder arguments."""
    for name, method in inspect.getmembers(kube, inspect.ismethod):
        if name.startswith("_") or name in ("close", "from_settings"):
            continue
        args: list[Any] = []
        for parameter in inspect.signature(method).parameters.values():
            if parameter.default is not inspect.Parameter.empty:
                break
            plain = parameter.annotation in ("str", str)
            args.append("k" if plain else {"metadata": {"name": "n"}})
        called = method(*args)
        if inspect.isasyncgen(called):
            async for _ in called:
                pass
        else:
            await called


def calls_in_code() -> set[Permission]:
    """The (apiGroup, resource, verb) of every Kubernetes API call the platform's one module
    that talks to the API server can make: each of its public methods run once over a
    recording lean client (every request of that client goes through `call`, `stream` or
    `stream_lines`)."""
    recorder = _Recorder()
    asyncio.run(_every_call(kube_client.KubeClient(recorder)))
    return recorder.seen


def token_id(kubeconfig: Path) -> str:
    """The jti of the ServiceAccount token in `kubeconfig`: the API server records it with
    every request (user.extra credential-id), so one process's requests can be told apart
    from other users of the same ServiceAccount."""
    token = yaml.safe_load(kubeconfig.read_text())["users"][0]["user"]["token"]
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    return str(claims["jti"])


ADMIN_PASSWORD = "rbac-admin-password-0192"


@pytest.fixture
def platform_process(
    cluster: Cluster,
    installed: None,
    operator: OperatorProcess,
    tmp_path: Path,
) -> Iterator[PlatformProcess]:
    """The platform API as a process, on SQLite, under its ServiceAccount's own token."""
    server = PlatformProcess(
        cluster.kubeconfig,
        cluster.kubectl_path,
        tmp_path / "platform",
        env={
            "HUMANWORK_DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'platform.db'}",
            "HUMANWORK_ADMIN_PASSWORD": ADMIN_PASSWORD,
            "HUMANWORK_JWT_SECRET": "rbac-jwt-secret-0123456789-0123456789",
        },
    )
    server.start()
    yield server
    server.stop()
    print(server.tail(40))


def _ok(response: httpx.Response, status: int = 200) -> dict[str, Any]:
    assert response.status_code == status, (response.status_code, response.text)
    body: dict[str, Any] = response.json()
    return body


def drive_every_platform_call(cluster: Cluster, http: httpx.Client, made: list[str]) -> None:
    """Everything the platform does with Kubernetes: org namespaces (created, and read when
    one exists), tasks (created, listed, read, watched, decided, archived) and the agent
    side (tokens checked against the AgentInstance and the published keys and
    revocations, a token refresh, a signed event read with the callback master key that
    records the applied configuration). `made` collects the namespaces to delete."""
    core = client.CoreV1Api(cluster.api)
    admin = {
        "Authorization": "Bearer "
        + _ok(http.post("/auth/token", json={"username": "admin", "password": ADMIN_PASSWORD}))[
            "access_token"
        ]
    }
    suffix = uuid.uuid4().hex[:6]

    # a namespace that exists for another org: the platform reads its labels and refuses
    taken = f"org-taken-{suffix}"
    core.create_namespace(
        client.V1Namespace(
            metadata=client.V1ObjectMeta(
                name=taken, labels={"humanwork.io/org-id": str(uuid.uuid4())}
            )
        )
    )
    made.append(taken)
    refused = http.post("/orgs", json={"slug": f"taken-{suffix}", "name": "T"}, headers=admin)
    assert refused.status_code == 409, refused.text

    org = _ok(http.post("/orgs", json={"slug": f"rbac-{suffix}", "name": "R"}, headers=admin), 201)
    ns, org_id = org["namespace"], org["id"]
    made.append(ns)
    expert_password = f"expert-{suffix}-0123456789"
    _ok(
        http.post(
            "/users",
            json={
                "username": f"expert-{suffix}",
                "password": expert_password,
                "role": "expert",
                "org_ids": [org_id],
            },
            headers=admin,
        ),
        201,
    )
    expert = {
        "Authorization": "Bearer "
        + _ok(
            http.post(
                "/auth/token", json={"username": f"expert-{suffix}", "password": expert_password}
            )
        )["access_token"]
    }
    # the router lists the org's agents (none yet: 409 org_has_no_agent, issue 15 item 5)
    none = http.post(f"/orgs/{org_id}/tasks", json={"request": "Reconcile"}, headers=admin)
    assert none.status_code == 409 and none.json()["code"] == "org_has_no_agent", none.text
    provision_agent(cluster, ns, org_id)
    agent_token, callback_secret = agent_credentials(cluster, ns)

    plan = {
        "orgId": org_id,
        "agentRef": "agent",
        "description": "Reconcile October",
        "steps": [
            {
                "id": "read",
                "description": "Fetch October orders",
                "kind": "action",
                "tool": "amazon_query",
                "parameters": {"month": "2026-10"},
                "risk": "high",
            }
        ],
    }
    task = _ok(http.post("/agentic/tasks", json=plan, headers=admin), 201)
    task_id = task["id"]
    _ok(http.get("/agentic/tasks", params={"org_id": org_id}, headers=expert))

    def decidable() -> bool:
        items = _ok(http.get("/human-tasks", params={"org_id": org_id}, headers=expert))
        return any(item["id"].startswith(task_id + "/") for item in items["items"])

    assert eventually(decidable, timeout=30)  # the watch saw it, the operator set its phase
    _ok(
        http.post(
            f"/agentic/tasks/{task_id}/steps/read/reject",
            json={"feedback": "not this month"},
            headers=expert,
        )
    )

    def archived() -> bool:  # the platform archives the finished task, the operator removes it
        return not _tasks(cluster, ns)

    assert eventually(archived, timeout=30)
    finished = _ok(http.get(f"/agentic/tasks/{task_id}", headers=expert))  # from the archive
    assert finished["status"]["phase"] == "Rejected"

    bearer = {"Authorization": f"Bearer {agent_token}"}
    _ok(http.get("/v1/agent-api/whoami", headers=bearer))
    wanted = get_instance(cluster, ns)["status"]["configHash"]
    event = json.dumps(
        {
            "event_type": "config.applied",
            "agent_id": f"{ns}/agent",
            "org_id": org_id,
            "task_id": "reconcile-october",
            "step_id": None,
            "timestamp": datetime.now(UTC).isoformat(),
            "payload": {"configHash": wanted},
            "idempotency_key": str(uuid.uuid4()),
        }
    ).encode()
    signed = http.post(
        "/v1/agent-events",
        content=event,
        headers={
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(callback_secret, event, datetime.now(UTC)),
        },
    )
    _ok(signed)
    annotations = get_instance(cluster, ns)["metadata"]["annotations"]
    assert annotations["humanwork.io/config-applied"] == wanted
    _ok(http.post("/v1/agent-api/token/refresh", headers=bearer), 202)

    # issue 15: the org's agents managed through the platform (list, create, patch, delete)
    _ok(http.get(f"/orgs/{org_id}/agents", headers=admin))
    spec = {k: v for k, v in instance_manifest(ns, org_id)["spec"].items() if k != "orgId"}
    agents = f"/orgs/{org_id}/agents"
    _ok(http.post(agents, json={"name": "second", "spec": spec}, headers=admin), 201)
    _ok(http.patch(f"{agents}/second", json={"spec": {"replicas": 0}}, headers=admin))
    assert http.delete(f"{agents}/second", headers=admin).status_code == 204


def test_the_platform_api_uses_exactly_the_permissions_it_is_granted(
    cluster: Cluster, platform_process: PlatformProcess
) -> None:
    if not cluster.info:
        pytest.skip("the API server's audit log is read on the local control plane only")
    made: list[str] = []
    try:
        with httpx.Client(base_url=platform_process.url, timeout=60) as http:
            drive_every_platform_call(cluster, http, made)
    finally:
        for name in made:
            client.CoreV1Api(cluster.api).delete_namespace(name)
    jti = token_id(platform_process.kubeconfig)
    requests, refused = audit_requests(
        _audit_log(cluster),
        PLATFORM_USER,
        lambda entry: (
            entry["user"].get("extra", {}).get("authentication.kubernetes.io/credential-id")
            == [f"JTI={jti}"]
        ),
    )
    assert requests, f"no request of the platform's token {jti} in the audit log"
    assert not refused, _describe(refused)
    grants = rbac_grants(PLATFORM_RBAC, "humanwork-platform-api")
    # every request is allowed by a grant, in its namespace and for its object names
    uncovered = {r for r in requests if not any(g.allows(r) for g in grants)}
    assert not uncovered, sorted(uncovered, key=str)
    # every grant was used: nothing "just in case"
    unused = {g for g in grants if not any(g.allows(r) for r in requests)}
    assert not unused, sorted(unused, key=str)
    # and the scenario made every call the code can make (a call added to the client
    # without a step here would otherwise go unchecked)
    in_code = calls_in_code()
    assert in_code == {r.permission for r in requests}, (
        sorted(in_code - {r.permission for r in requests}),
        sorted({r.permission for r in requests} - in_code),
    )
