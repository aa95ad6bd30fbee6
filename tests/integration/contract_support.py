"""Helpers for the resource-contract tests: installing the contract, real identities, and
the three writers of an AgenticTask's status acting through `humanwork_core.taskflow`.

Everything here talks to the API server as some identity: the admin (group
system:masters) or a ServiceAccount whose token comes from the TokenRequest API. No
impersonation: the admission policies see the same usernames the components will have.
"""

from __future__ import annotations

import copy
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.policy import STRICT
from humanwork_core.resources import (
    API_VERSION,
    GROUP,
    ORG_ID_LABEL,
    VERSION,
    AgenticTask,
    Condition,
    Step,
    Verdict,
    set_condition,
)
from humanwork_dev.crdwait import wait_established
from tests.conftest import Cluster
from tests.support import eventually

REPO = Path(__file__).resolve().parents[2]
CRD_NAMES = ("agentictasks.humanwork.io", "agentinstances.humanwork.io")
SYSTEM_NAMESPACE = "humanwork-system"
PLATFORM_SA = "humanwork-platform-api"
OPERATOR_SA = "humanwork-operator"
AGENT_NAME = "acme-ecommerce"
"""The AgentInstance the test tasks name in spec.agentRef; its identity is <name>-agent."""
OTHER_AGENT_NAME = "acme-support"
"""Another agent of the same org: it may not touch tasks that name acme-ecommerce."""
INTRUDER_SA = "intruder"
"""A ServiceAccount in the org namespace with the same RBAC grants but no role in the
contract: whatever it writes to a task's status must be refused by the policies alone."""

ADMIN, PLATFORM, OPERATOR, AGENT, OTHER_AGENT, INTRUDER = (
    "admin",
    "platform",
    "operator",
    "agent",
    "other-agent",
    "intruder",
)
FIELD_MANAGERS = {
    ADMIN: "contract-test-admin",
    PLATFORM: "humanwork-platform-api",
    OPERATOR: "humanwork-operator",
    AGENT: f"{AGENT_NAME}-agent",
    OTHER_AGENT: f"{OTHER_AGENT_NAME}-agent",
    INTRUDER: INTRUDER_SA,
}
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"


def now() -> datetime:
    return datetime.now(UTC)


def api_error(exc: client.ApiException) -> tuple[int, str]:
    """HTTP status and the Status message of a refused request."""
    try:
        message = str(json.loads(exc.body)["message"])
    except (TypeError, ValueError, KeyError):
        message = str(exc.body)
    return int(exc.status), message


# --- objects -------------------------------------------------------------------------------


def plan() -> list[dict[str, Any]]:
    """The seeds' example plan: a low-risk read, then a high-risk write."""
    return [
        {
            "id": "fetch-orders",
            "description": "Fetch all Amazon orders for October",
            "kind": "action",
            "tool": "amazon_query",
            "parameters": {"action": "listOrders", "dateRange": "2026-10"},
            "risk": "low",
        },
        {
            "id": "update-inventory",
            "description": "Update Shopify inventory for 14 mismatched SKUs",
            "kind": "action",
            "tool": "shopify_query",
            "parameters": {"action": "updateInventory", "skuCount": 14},
            "risk": "high",
        },
    ]


def task_body(name: str, namespace: str, org_id: str) -> dict[str, Any]:
    """A valid AgenticTask naming the agent acme-ecommerce, as that agent may create it
    (`requestedBy` is `agent:<name>`, see manifests/base/policies/agent-task-identity.yaml)."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AgenticTask",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "orgId": org_id,
            "agentRef": {"name": AGENT_NAME},
            "conversationId": str(uuid.uuid4()),
            "description": "Reconcile all Amazon orders for October and update inventory",
            "requestedBy": f"agent:{AGENT_NAME}",
            "steps": plan(),
        },
    }


def agent_instance_body(name: str, namespace: str, org_id: str) -> dict[str, Any]:
    """A valid AgentInstance."""
    return {
        "apiVersion": API_VERSION,
        "kind": "AgentInstance",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "orgId": org_id,
            "specialist": {"name": "Bob", "systemPrompt": "You reconcile orders."},
            "model": "openai/gpt-4o",
            "llm": {
                "baseURL": "https://openrouter.ai/api/v1",
                "apiKeySecretRef": {"name": "acme-llm", "key": "api-key"},
            },
        },
    }


def decision(
    obj: dict[str, Any], step_id: str, verdict: str = "approve", by: str = "alice@acme.example"
) -> dict[str, Any]:
    """A well-formed decision record on a step of `obj`, bound to it by its hash."""
    step = next(s for s in obj["spec"]["steps"] if s["id"] == step_id)
    return {
        "verdict": verdict,
        "by": by,
        "at": now().isoformat().replace("+00:00", "Z"),
        "idempotencyKey": uuid.uuid4().hex,
        "stepHash": taskflow.step_hash(Step.from_wire(step)),
    }


def execution(state: str = "Running") -> dict[str, Any]:
    """A well-formed execution record."""
    return {"state": state, "attempt": 1, "startedAt": now().isoformat().replace("+00:00", "Z")}


def status_steps(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """A deep copy of status.steps (empty when there is none)."""
    return copy.deepcopy((obj.get("status") or {}).get("steps", []))


def step_index(obj: dict[str, Any], step_id: str) -> int:
    """Position of a step's entry in status.steps (for JSON patches)."""
    return next(i for i, s in enumerate(status_steps(obj)) if s["id"] == step_id)


# --- talking to the API server as one identity ----------------------------------------------


@dataclass
class Resources:
    """Custom-object calls in one namespace, as one identity, with its own field manager."""

    api: client.ApiClient
    namespace: str
    manager: str
    plural: str = "agentictasks"

    @property
    def _objects(self) -> client.CustomObjectsApi:
        return client.CustomObjectsApi(self.api)

    def of(self, plural: str) -> Resources:
        return Resources(self.api, self.namespace, self.manager, plural)

    def create(self, body: dict[str, Any]) -> dict[str, Any]:
        namespace = body["metadata"].get("namespace", self.namespace)
        return dict(
            self._objects.create_namespaced_custom_object(
                GROUP, VERSION, namespace, self.plural, body
            )
        )

    def get(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        return dict(
            self._objects.get_namespaced_custom_object(
                GROUP, VERSION, namespace or self.namespace, self.plural, name
            )
        )

    def delete(self, name: str, namespace: str | None = None) -> None:
        self._objects.delete_namespaced_custom_object(
            GROUP, VERSION, namespace or self.namespace, self.plural, name
        )

    def merge(self, name: str, patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch of the main resource (spec)."""
        return dict(
            self._objects.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, self.plural, name, patch
            )
        )

    def json_patch(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """RFC 6902 JSON patch of the main resource."""
        return dict(
            self._objects.patch_namespaced_custom_object(
                GROUP, VERSION, self.namespace, self.plural, name, ops, _content_type=JSON_PATCH
            )
        )

    def apply_status(
        self, name: str, status: dict[str, Any], *, force: bool = False
    ) -> dict[str, Any]:
        """Server-side apply of `status` on the status subresource, as this identity's
        field manager (what each writer does with taskflow.owned_status)."""
        body = {
            "apiVersion": API_VERSION,
            "kind": "AgenticTask" if self.plural == "agentictasks" else "AgentInstance",
            "metadata": {"name": name, "namespace": self.namespace},
            "status": status,
        }
        return dict(
            self._objects.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                self.plural,
                name,
                body,
                field_manager=self.manager,
                force=force,
                _content_type=APPLY_PATCH,
            )
        )

    def merge_status(self, name: str, status: dict[str, Any] | None) -> dict[str, Any]:
        """JSON merge patch of the status subresource (lists are replaced whole)."""
        return dict(
            self._objects.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                self.plural,
                name,
                {"status": status},
                field_manager=self.manager,
            )
        )

    def json_patch_status(self, name: str, ops: list[dict[str, Any]]) -> dict[str, Any]:
        """RFC 6902 JSON patch of the status subresource."""
        return dict(
            self._objects.patch_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                self.plural,
                name,
                ops,
                field_manager=self.manager,
                _content_type=JSON_PATCH,
            )
        )

    def replace_status(self, obj: dict[str, Any]) -> dict[str, Any]:
        """PUT of the status subresource: fails with 409 unless obj's resourceVersion is
        still the stored one."""
        return dict(
            self._objects.replace_namespaced_custom_object_status(
                GROUP,
                VERSION,
                self.namespace,
                self.plural,
                obj["metadata"]["name"],
                obj,
                field_manager=self.manager,
            )
        )


@dataclass
class Contract:
    """The installed contract and the identities that use it, for one test module."""

    cluster: Cluster
    namespace: str
    """An org namespace (labelled with org_id) where the test tasks live."""
    org_id: str
    unlabelled_namespace: str
    """A namespace with no org label."""
    usernames: dict[str, str]
    clients: dict[str, client.ApiClient]
    tokens: dict[str, str] = field(default_factory=dict)

    def as_(self, actor: str, plural: str = "agentictasks") -> Resources:
        return Resources(self.clients[actor], self.namespace, FIELD_MANAGERS[actor], plural)

    @property
    def admin(self) -> Resources:
        return self.as_(ADMIN)

    def placeholders(self) -> dict[str, str]:
        return {
            "ns": self.namespace,
            "unlabelled": self.unlabelled_namespace,
            "org": self.org_id,
            **{actor: user for actor, user in self.usernames.items()},
        }

    def kubeconfig_for(self, actor: str, path: Path) -> Path:
        """A kubeconfig that authenticates with `actor`'s token only (for kubectl)."""
        cfg = self.cluster.api.configuration
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "c",
                            "cluster": {
                                "server": cfg.host,
                                "certificate-authority": cfg.ssl_ca_cert,
                            },
                        }
                    ],
                    "users": [{"name": actor, "user": {"token": self.tokens[actor]}}],
                    "contexts": [
                        {
                            "name": actor,
                            "context": {"cluster": "c", "user": actor, "namespace": self.namespace},
                        }
                    ],
                    "current-context": actor,
                }
            ),
            encoding="utf-8",
        )
        return path


# --- the three writers, each through taskflow and owned_status --------------------------------


def _model(obj: dict[str, Any]) -> AgenticTask:
    return AgenticTask.from_wire(obj)


def operator_tick(
    contract: Contract, name: str, condition: Condition | None = None
) -> dict[str, Any]:
    """The operator brings the derived fields up to date, and sets `condition` if given
    (its server-side apply)."""
    task = _model(contract.admin.get(name))
    status = taskflow.tick(task, now())
    if condition is not None:
        conditions = set_condition(status.conditions, condition, now=now())
        status = status.model_copy(update={"conditions": conditions})
    body = taskflow.owned_status(status, taskflow.Writer.OPERATOR)
    return contract.as_(OPERATOR).apply_status(name, body)


def platform_decide(
    contract: Contract,
    name: str,
    step_id: str,
    verdict: Verdict = Verdict.APPROVE,
    by: str = "alice@acme.example",
) -> dict[str, Any]:
    """The platform API records an expert's decision (its server-side apply)."""
    task = _model(contract.admin.get(name))
    step = task.step(step_id)
    assert step is not None
    request = taskflow.DecisionRequest(
        verdict=verdict,
        by=by,
        step_hash=taskflow.step_hash(step),
        idempotency_key=uuid.uuid4().hex,
        feedback="looks right" if verdict is Verdict.APPROVE else "wrong month",
    )
    status = taskflow.decide(task, step_id, request, now(), org=STRICT)
    body = taskflow.owned_status(status, taskflow.Writer.PLATFORM_API)
    return contract.as_(PLATFORM).apply_status(name, body)


def agent_start(contract: Contract, name: str, step_id: str) -> dict[str, Any]:
    """The agent records that it started an approved step (its server-side apply)."""
    task = _model(contract.admin.get(name))
    status = taskflow.start_execution(task, step_id, now())
    body = taskflow.owned_status(status, taskflow.Writer.AGENT)
    return contract.as_(AGENT).apply_status(name, body)


def agent_finish(
    contract: Contract, name: str, step_id: str, result: dict[str, Any]
) -> dict[str, Any]:
    """The agent records that a running step succeeded (its server-side apply)."""
    task = _model(contract.admin.get(name))
    status = taskflow.finish_execution(task, step_id, now(), result=result)
    body = taskflow.owned_status(status, taskflow.Writer.AGENT)
    return contract.as_(AGENT).apply_status(name, body)


def new_task(contract: Contract, prefix: str) -> str:
    """The agent proposes a fresh task; returns its name."""
    name = f"{prefix}-{uuid.uuid4().hex[:6]}"
    contract.as_(AGENT).create(task_body(name, contract.namespace, contract.org_id))
    return name


STARTS: dict[str, Callable[[Contract, str], Any]] = {}
"""How to bring a fresh task to each named starting state, with the real writers."""


def _start(name: str) -> Callable[[Callable[[Contract, str], Any]], Callable[[Contract, str], Any]]:
    def register(fn: Callable[[Contract, str], Any]) -> Callable[[Contract, str], Any]:
        STARTS[name] = fn
        return fn

    return register


@_start("created")
def _created(contract: Contract, name: str) -> None:
    return None


@_start("pending")
def _pending(contract: Contract, name: str) -> None:
    operator_tick(contract, name)


@_start("approved")
def _approved(contract: Contract, name: str) -> None:
    operator_tick(contract, name)
    platform_decide(contract, name, "fetch-orders")


@_start("executing")
def _executing(contract: Contract, name: str) -> None:
    _approved(contract, name)
    agent_start(contract, name, "fetch-orders")


@_start("step-rejected")
def _step_rejected(contract: Contract, name: str) -> None:
    operator_tick(contract, name)
    platform_decide(contract, name, "fetch-orders", Verdict.REJECT)


@_start("rejected")
def _rejected(contract: Contract, name: str) -> None:
    _step_rejected(contract, name)
    operator_tick(contract, name)


def start_task(contract: Contract, start: str, prefix: str) -> str:
    """A new task brought to `start`; returns its name."""
    name = new_task(contract, prefix)
    STARTS[start](contract, name)
    return name


# --- installing the contract ----------------------------------------------------------------


def install_crds(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-k", str(REPO / "crds"))
    wait_established(cluster.kubectl_path, cluster.kubeconfig, CRD_NAMES)


def install_policies(cluster: Cluster) -> None:
    cluster.kubectl("apply", "-k", str(REPO / "manifests" / "base" / "policies"))


def ensure_service_account(core: client.CoreV1Api, namespace: str, name: str) -> None:
    try:
        core.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=name))
        )
    except client.ApiException as exc:
        if exc.status != 409:
            raise


def mint_token(core: client.CoreV1Api, namespace: str, name: str) -> str:
    """A TokenRequest token for a ServiceAccount (one hour)."""
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[], expiration_seconds=3600)
    )
    return str(core.create_namespaced_service_account_token(name, namespace, request).status.token)


@dataclass
class Grant:
    """A test-only ClusterRole and binding on agentictasks for some ServiceAccounts."""

    name: str
    rbac: client.RbacAuthorizationV1Api

    @classmethod
    def create(cls, api: client.ApiClient, subjects: list[tuple[str, str]], suffix: str) -> Grant:
        rbac = client.RbacAuthorizationV1Api(api)
        name = f"humanwork-contract-test-{suffix}"
        labels = {"app.kubernetes.io/part-of": "humanwork-tests"}
        rbac.create_cluster_role(
            client.V1ClusterRole(
                metadata=client.V1ObjectMeta(name=name, labels=labels),
                rules=[
                    client.V1PolicyRule(
                        api_groups=[GROUP],
                        resources=["agentictasks"],
                        verbs=["get", "list", "watch", "create", "update", "patch"],
                    ),
                    client.V1PolicyRule(
                        api_groups=[GROUP],
                        resources=["agentictasks/status"],
                        verbs=["get", "update", "patch"],
                    ),
                ],
            )
        )
        grant = cls(name, rbac)
        try:
            rbac.create_cluster_role_binding(
                client.V1ClusterRoleBinding(
                    metadata=client.V1ObjectMeta(name=name, labels=labels),
                    role_ref=client.V1RoleRef(
                        api_group="rbac.authorization.k8s.io", kind="ClusterRole", name=name
                    ),
                    subjects=[
                        client.RbacV1Subject(kind="ServiceAccount", name=sa, namespace=ns)
                        for ns, sa in subjects
                    ],
                )
            )
        except BaseException:
            grant.delete()
            raise
        return grant

    def delete(self) -> None:
        for remove in (self.rbac.delete_cluster_role_binding, self.rbac.delete_cluster_role):
            try:
                remove(self.name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


def wait_until_policies_active(contract: Contract) -> None:
    """Probe each policy with a write it must refuse until it is refused; undo whatever a
    probe created while a policy was not active yet."""
    admin = contract.admin

    def org_id_policy_refuses() -> bool:
        name = f"probe-org-{uuid.uuid4().hex[:6]}"
        body = task_body(name, contract.namespace, str(uuid.uuid4()))
        try:
            admin.create(body)
        except client.ApiException as exc:
            return (
                api_error(exc)[0] in (403, 422)
                and "must equal the humanwork.io/org-id" in (api_error(exc)[1])
            )
        admin.delete(name)
        return False

    def status_policies_refuse() -> bool:
        name = f"probe-status-{uuid.uuid4().hex[:6]}"
        admin.create(task_body(name, contract.namespace, contract.org_id))
        try:
            # the writers policy (with its parameters) lets the operator through ...
            contract.as_(OPERATOR).merge_status(name, {"phase": "PendingApproval"})
            # ... and refuses an unrelated identity,
            try:
                contract.as_(INTRUDER).merge_status(name, {"phase": "InProgress"})
                return False
            except client.ApiException as exc:
                if "may be written only by" not in api_error(exc)[1]:
                    return False
            # and the integrity policy refuses even a cluster admin
            try:
                admin.merge_status(name, {"steps": [{"id": "not-in-the-plan"}]})
                return False
            except client.ApiException as exc:
                return "may only name steps of spec.steps" in api_error(exc)[1]
        finally:
            admin.delete(name)

    eventually(org_id_policy_refuses, timeout=60, interval=0.5)
    eventually(status_policies_refuse, timeout=60, interval=0.5)


def wait_until_authorized(contract: Contract, actors: list[str]) -> None:
    """RBAC grants reach the authorizer's cache within a moment: wait for each identity."""
    for actor in actors:
        resources = contract.as_(actor)
        eventually(
            lambda r=resources: client.CustomObjectsApi(r.api).list_namespaced_custom_object(
                GROUP, VERSION, r.namespace, "agentictasks"
            ),
            timeout=30,
        )


def org_namespace_labels(org_id: str) -> dict[str, str]:
    return {ORG_ID_LABEL: org_id, "app.kubernetes.io/part-of": "humanwork-tests"}


def delete_namespaces(core: client.CoreV1Api, names: list[str]) -> None:
    for name in names:
        try:
            core.delete_namespace(name)
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def installed_contract(cluster: Cluster) -> Iterator[Contract]:
    """Install CRDs and policies, create the identities and their grants, wait until all of
    it is in force; clean up what is not shared afterwards (the CRDs, policies and the
    humanwork-system namespace with its two ServiceAccounts stay, as a `make up` leaves
    them: other modules apply the same)."""
    install_crds(cluster)
    install_policies(cluster)
    core = client.CoreV1Api(cluster.api)
    suffix = uuid.uuid4().hex[:8]
    org_id = str(uuid.uuid4())
    namespace = f"contract-{suffix}"
    unlabelled = f"contract-nolabel-{suffix}"
    created_namespaces: list[str] = []
    grant: Grant | None = None
    clients: dict[str, client.ApiClient] = {}
    try:
        for name, labels in (
            (namespace, org_namespace_labels(org_id)),
            (unlabelled, {"app.kubernetes.io/part-of": "humanwork-tests"}),
        ):
            core.create_namespace(
                client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
            )
            created_namespaces.append(name)
        service_accounts = {
            PLATFORM: (SYSTEM_NAMESPACE, PLATFORM_SA),
            OPERATOR: (SYSTEM_NAMESPACE, OPERATOR_SA),
            AGENT: (namespace, f"{AGENT_NAME}-agent"),
            OTHER_AGENT: (namespace, f"{OTHER_AGENT_NAME}-agent"),
            INTRUDER: (namespace, INTRUDER_SA),
        }
        for ns, sa in service_accounts.values():
            ensure_service_account(core, ns, sa)
        grant = Grant.create(cluster.api, list(service_accounts.values()), suffix)
        tokens = {
            actor: eventually(lambda ns=ns, sa=sa: mint_token(core, ns, sa), timeout=30)
            for actor, (ns, sa) in service_accounts.items()
        }
        clients = {actor: cluster.client_for_token(token) for actor, token in tokens.items()}
        clients[ADMIN] = cluster.api
        usernames = {
            actor: f"system:serviceaccount:{ns}:{sa}"
            for actor, (ns, sa) in service_accounts.items()
        }
        contract = Contract(
            cluster=cluster,
            namespace=namespace,
            org_id=org_id,
            unlabelled_namespace=unlabelled,
            usernames=usernames,
            clients=clients,
            tokens=tokens,
        )
        wait_until_authorized(contract, list(service_accounts))
        wait_until_policies_active(contract)
        yield contract
    finally:
        for actor, api in clients.items():
            if actor != ADMIN:
                api.close()
        if grant is not None:
            grant.delete()
        delete_namespaces(core, created_namespaces)
