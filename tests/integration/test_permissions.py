"""Least privilege, checked from each component's own token (issue 12, item 6).

For the operator, the platform API and an agent (its ServiceAccount as the operator made
it), a real TokenRequest token asks the API server what it may do
(`SelfSubjectRulesReview`) in the platform's namespace, an org's namespace and a namespace
of no org; minus what every ServiceAccount may do (the rules of a fresh ServiceAccount with
no binding), the answer must equal the matrix written below, so any widening of a role
(a verb, a resource, a wildcard, `escalate` or `bind`) fails here. Then the things RBAC
cannot say, tried from the same tokens as dry runs: what the admission policies forbid
each identity stays forbidden.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from kubernetes import client

from humanwork_dev.processes import PLATFORM_NS
from tests.conftest import Cluster
from tests.integration.contract_support import decision
from tests.integration.test_tasks import create_task, task_manifest
from tests.support import eventually, service_account_token

Permission = tuple[str, str, str, str]
"""(apiGroup, resource[/subresource], verb, resourceName or '*')."""
HW = "humanwork.io"
RBAC = "rbac.authorization.k8s.io"
ORG_SECRETS = "humanwork-operator-org-secrets"
KEY_SECRETS = ("humanwork-agent-signing-keys", "humanwork-callback-key")


def grant(
    group: str, resources: Iterable[str], verbs: Iterable[str], names: Iterable[str] = ("*",)
) -> set[Permission]:
    return {(group, r, v, n) for r in resources for v in verbs for n in names}


OPERATOR_EVERYWHERE = (
    grant(HW, ["agentinstances"], ["get", "list", "watch", "patch"])
    | grant(HW, ["agentinstances/status"], ["patch"])
    | grant(HW, ["agentinstances/scale"], ["patch"])  # the autoscaler (issue 15, item 3)
    | grant(HW, ["agentictasks"], ["get", "list", "watch", "create", "delete"])
    | grant(HW, ["agentictasks/status"], ["get", "patch"])
    | grant("", ["namespaces"], ["get", "list", "watch", "patch"])
    # no Secret anywhere (below: its key material, and the Secrets of org namespaces);
    # ConfigMaps everywhere (the policies keep it from the admission parameters)
    | grant("", ["configmaps"], ["get", "list", "watch", "create", "patch"])
    | grant("", ["serviceaccounts", "services"], ["list", "watch", "create", "patch"])
    | grant(RBAC, ["roles", "rolebindings"], ["list", "watch", "create", "patch"])
    | grant("networking.k8s.io", ["networkpolicies"], ["list", "watch", "create", "patch"])
    | grant("apps", ["deployments"], ["get", "list", "watch", "create", "patch"])
    | grant("", ["events"], ["create"])
    | grant("apiextensions.k8s.io", ["customresourcedefinitions"], ["list", "watch"])
    # to bind itself to the org Secrets ClusterRole, and no other
    | grant(RBAC, ["clusterroles"], ["bind"], [ORG_SECRETS])
)
OPERATOR_IN_DEFAULT = grant("discovery.k8s.io", ["endpointslices"], ["list"])
"""The API server's endpoints (the `kubernetes` EndpointSlices), for the agents' egress."""
OPERATOR_IN_SYSTEM = (
    grant("", ["secrets"], ["get"], KEY_SECRETS)
    | grant("", ["secrets"], ["create"])
    | grant("coordination.k8s.io", ["leases"], ["get", "create", "update"])
)
"""Its key material by name; `create` cannot take names (a policy refuses any other)."""
OPERATOR_IN_ORG = grant("", ["secrets"], ["get", "create", "patch"])
"""Through the RoleBinding it makes in each org namespace (humanwork-operator-secrets)."""
PLATFORM_EVERYWHERE = (
    grant(HW, ["agentictasks"], ["get", "list", "watch", "create", "patch"])
    | grant(HW, ["agentictasks/status"], ["patch"])
    | grant(HW, ["agentinstances"], ["get", "list", "create", "patch", "delete"])
    | grant("", ["namespaces"], ["get", "create"])
)
PLATFORM_IN_SYSTEM = grant(
    "",
    ["configmaps"],
    ["get"],
    ["humanwork-agent-jwks", "humanwork-agent-revocations", "humanwork-admission"],
) | grant("", ["secrets"], ["get"], ["humanwork-callback-key"])
AGENT_AT_HOME = grant(HW, ["agentictasks"], ["get", "list", "watch", "create"]) | grant(
    HW, ["agentictasks/status"], ["get", "patch"]
)


def rules(api: client.ApiClient, namespace: str) -> set[Permission]:
    review = client.AuthorizationV1Api(api).create_self_subject_rules_review(
        client.V1SelfSubjectRulesReview(
            spec=client.V1SelfSubjectRulesReviewSpec(namespace=namespace)
        )
    )
    assert not review.status.incomplete, review.status.evaluation_error
    found: set[Permission] = set()
    for rule in review.status.resource_rules or []:
        for group in rule.api_groups or [""]:
            found |= grant(group, rule.resources or [], rule.verbs, rule.resource_names or ["*"])
    return found


@pytest.fixture
def identities(
    cluster: Cluster, installed: None, ready_agent: tuple[str, str]
) -> Iterator[dict[str, Any]]:
    """API clients of each identity's own token, the namespaces to ask about, and what a
    ServiceAccount with no binding may do there."""
    ns, org_id = ready_agent
    core = client.CoreV1Api(cluster.api)
    nobody = f"nobody-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_service_account(
        ns, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=nobody))
    )
    accounts = {
        "operator": (PLATFORM_NS, "humanwork-operator"),
        "platform": (PLATFORM_NS, "humanwork-platform-api"),
        "agent": (ns, "agent-agent"),
        "nobody": (ns, nobody),
    }
    clients = {
        who: cluster.client_for_token(
            eventually(lambda n=n, a=a: service_account_token(cluster.api, n, a), timeout=30)
        )
        for who, (n, a) in accounts.items()
    }
    namespaces = {"system": PLATFORM_NS, "org": ns, "elsewhere": "default"}
    baseline = {key: rules(clients["nobody"], name) for key, name in namespaces.items()}
    try:
        yield {
            "clients": clients,
            "namespaces": namespaces,
            "baseline": baseline,
            "org_id": org_id,
        }
    finally:
        for api in clients.values():
            api.close()


def granted(identities: dict[str, Any], who: str, where: str) -> set[Permission]:
    api = identities["clients"][who]
    return rules(api, identities["namespaces"][where]) - identities["baseline"][where]


WHERE = ("system", "org", "elsewhere")


def test_each_component_holds_exactly_its_matrix(identities: dict[str, Any]) -> None:
    for where in WHERE:
        operator = OPERATOR_EVERYWHERE | {
            "system": OPERATOR_IN_SYSTEM,
            "org": OPERATOR_IN_ORG,
            "elsewhere": OPERATOR_IN_DEFAULT,
        }.get(where, set())
        assert granted(identities, "operator", where) == operator, where
        platform = PLATFORM_EVERYWHERE | (PLATFORM_IN_SYSTEM if where == "system" else set())
        assert granted(identities, "platform", where) == platform, where
        agent = AGENT_AT_HOME if where == "org" else set()
        assert granted(identities, "agent", where) == agent, where
    # and none can change RBAC beyond itself, or touch the admission policies
    for who in ("operator", "platform", "agent"):
        for where in WHERE:
            held = granted(identities, who, where)
            if who == "operator":  # bind, on its org Secrets ClusterRole only
                held -= grant(RBAC, ["clusterroles"], ["bind"], [ORG_SECRETS])
            assert not {p for p in held if p[2] in ("escalate", "bind", "impersonate", "*")}
            assert not {p for p in held if p[0] in ("admissionregistration.k8s.io", "*")}
            assert not {p for p in held if p[1] in ("clusterroles", "clusterrolebindings", "*")}


def _refused(call: Any) -> str:
    with pytest.raises(client.ApiException) as caught:
        call()
    assert caught.value.status == 403, caught.value.body
    return str(caught.value.body)


def test_what_rbac_cannot_say_the_policies_refuse(
    cluster: Cluster, identities: dict[str, Any]
) -> None:
    ns = identities["namespaces"]["org"]
    clients = identities["clients"]
    name = create_task(cluster, task_manifest(ns, identities["org_id"]))
    task = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        HW, "v1alpha1", ns, "agentictasks", name
    )
    for who in ("operator", "agent"):
        # only the platform writes decisions
        objects = client.CustomObjectsApi(clients[who])
        status = {"status": {"steps": [{"id": "read", "decision": decision(task, "read")}]}}
        body = _refused(
            lambda o=objects, status=status: o.patch_namespaced_custom_object_status(
                HW, "v1alpha1", ns, "agentictasks", name, status, dry_run="All"
            )
        )
        assert "decisions may be written only by the platform API" in body
    for who in ("operator", "platform"):
        # neither changes the admission policies' parameters ...
        params = {"data": {"platformApiUser": f"system:serviceaccount:{PLATFORM_NS}:{who}"}}
        _refused(
            lambda c=clients[who], p=params: client.CoreV1Api(c).patch_namespaced_config_map(
                "humanwork-admission", PLATFORM_NS, p, dry_run="All"
            )
        )
        # ... nor an AgentInstance's labels (the platform changes its spec for an org
        # admin, issue 15; the operator not even that)
        labels = {"metadata": {"labels": {"humanwork.io/org-id": "another"}}}
        body = _refused(
            lambda c=clients[who], s=labels: client.CustomObjectsApi(
                c
            ).patch_namespaced_custom_object(
                HW, "v1alpha1", ns, "agentinstances", "agent", s, dry_run="All"
            )
        )
        assert "labels of an AgentInstance" in body or "not its spec or labels" in body
        # ... nor the policies themselves
        _refused(
            lambda c=clients[who]: client.AdmissionregistrationV1Api(
                c
            ).delete_validating_admission_policy_binding(
                "humanwork-task-status-writers", dry_run="All"
            )
        )
    # the operator changes no AgentInstance's spec (no tool enabled behind the org admin's back)
    spec = {"spec": {"enabledTools": ["shopify_query", "amazon_query"]}}
    body = _refused(
        lambda: client.CustomObjectsApi(clients["operator"]).patch_namespaced_custom_object(
            HW, "v1alpha1", ns, "agentinstances", "agent", spec, dry_run="All"
        )
    )
    assert "not its spec or labels" in body
    # nor does the platform move an agent to another org: spec.orgId is immutable
    moved = {"spec": {"orgId": str(uuid.uuid4())}}
    with pytest.raises(client.ApiException) as caught:
        client.CustomObjectsApi(clients["platform"]).patch_namespaced_custom_object(
            HW, "v1alpha1", ns, "agentinstances", "agent", moved, dry_run="All"
        )
    assert caught.value.status == 422 and "spec.orgId is immutable" in str(caught.value.body)
    # the platform reads no Secret but the callback master key: not an agent's token
    _refused(
        lambda: client.CoreV1Api(clients["platform"]).read_namespaced_secret(
            "agent-agent-token", ns
        )
    )
    # an agent reads no Secret at all, not even its own
    _refused(
        lambda: client.CoreV1Api(clients["agent"]).read_namespaced_secret("agent-agent-token", ns)
    )


def _bystander(core: client.CoreV1Api, ns: str) -> str:
    name = f"bystander-{uuid.uuid4().hex[:6]}"
    core.create_namespaced_secret(
        ns,
        client.V1Secret(metadata=client.V1ObjectMeta(name=name), string_data={"k": "v"}),
    )
    return name


def test_the_operator_reads_no_secret_but_the_agents_and_its_keys(
    cluster: Cluster, identities: dict[str, Any], make_namespace: Any
) -> None:
    """From the operator's own token: the Secrets of `default`, of humanwork-system (but its
    two keys) and of a namespace of no org are out of reach, read or listed; an agent's
    token Secret in its org namespace and the key Secrets are in reach (positive control)."""
    admin = client.CoreV1Api(cluster.api)
    operator = client.CoreV1Api(identities["clients"]["operator"])
    org_ns = identities["namespaces"]["org"]
    plain = make_namespace("plain")
    planted = [(ns, _bystander(admin, ns)) for ns in ("default", PLATFORM_NS, plain)]
    try:
        for ns, name in planted:
            _refused(lambda ns=ns, name=name: operator.read_namespaced_secret(name, ns))
            _refused(lambda ns=ns: operator.list_namespaced_secret(ns))
        _refused(lambda: operator.list_secret_for_all_namespaces())
        _refused(lambda: operator.list_namespaced_secret(org_ns))  # no list there either
        for name in KEY_SECRETS:
            assert operator.read_namespaced_secret(name, PLATFORM_NS).data
        assert operator.read_namespaced_secret("agent-agent-token", org_ns).data["token"]
    finally:
        for ns, name in planted:
            if ns != plain:
                admin.delete_namespaced_secret(name, ns)


def _binding(ns: str, role: tuple[str, str], subject: tuple[str, str]) -> client.V1RoleBinding:
    return client.V1RoleBinding(
        metadata=client.V1ObjectMeta(name=f"try-{uuid.uuid4().hex[:6]}"),
        role_ref=client.V1RoleRef(api_group=RBAC, kind=role[0], name=role[1]),
        subjects=[
            client.RbacV1Subject(kind="ServiceAccount", namespace=subject[0], name=subject[1])
        ],
    )


def test_the_operator_cannot_bind_its_secret_access_elsewhere_nor_make_an_org(
    cluster: Cluster, identities: dict[str, Any], make_namespace: Any
) -> None:
    """The operator holds `bind` on humanwork-operator-org-secrets: the policies keep that
    binding to org namespaces and to itself, keep it from binding any other ClusterRole,
    from relabelling a namespace as an org (or unlabelling one), and from writing any
    Secret in humanwork-system but its keys, or a ServiceAccount token Secret anywhere."""
    api = identities["clients"]["operator"]
    rbac, core = client.RbacAuthorizationV1Api(api), client.CoreV1Api(api)
    org_ns, org_id = identities["namespaces"]["org"], identities["org_id"]
    me = (PLATFORM_NS, "humanwork-operator")
    org_secrets = ("ClusterRole", ORG_SECRETS)

    def bind(ns: str, role: tuple[str, str], subject: tuple[str, str]) -> Any:
        return rbac.create_namespaced_role_binding(ns, _binding(ns, role, subject), dry_run="All")

    for ns in ("default", make_namespace("plain")):
        body = _refused(lambda ns=ns: bind(ns, org_secrets, me))
        assert "has no humanwork.io/org-id label" in body
    body = _refused(lambda: bind(org_ns, org_secrets, (org_ns, "agent-agent")))
    assert "to itself only" in body
    # a ClusterRole whose rules it holds (its own) would pass RBAC: the policy refuses it
    body = _refused(lambda: bind(org_ns, ("ClusterRole", "humanwork-operator"), (org_ns, "x")))
    assert "binds Roles and the ClusterRole humanwork-operator-org-secrets only" in body
    body = _refused(lambda: bind(org_ns, ("Role", "agent-agent"), ("default", "default")))
    assert "only to ServiceAccounts of its namespace" in body
    bind(org_ns, org_secrets, me)  # positive control: what it does in an org namespace

    for ns, labels in (
        ("default", {"humanwork.io/org-id": org_id}),
        (org_ns, {"humanwork.io/org-id": str(uuid.uuid4())}),
        (org_ns, {"humanwork.io/org-id": None}),
    ):
        patch = {"metadata": {"labels": labels}}
        body = _refused(lambda ns=ns, p=patch: core.patch_namespace(ns, p, dry_run="All"))
        assert "humanwork.io/org-id label" in body
    # positive control: the Pod Security labels it sets
    core.patch_namespace(
        org_ns,
        {"metadata": {"labels": {"pod-security.kubernetes.io/warn": "restricted"}}},
        dry_run="All",
    )

    def secret(ns: str, name: str, kind: str = "Opaque", **annotations: str) -> Any:
        body = client.V1Secret(
            metadata=client.V1ObjectMeta(name=name, annotations=annotations or None), type=kind
        )
        return core.create_namespaced_secret(ns, body, dry_run="All")

    body = _refused(lambda: secret(PLATFORM_NS, "humanwork-platform-secrets"))
    assert "no Secret in humanwork-system but its key material" in body
    body = _refused(
        lambda: secret(
            org_ns,
            "minted",
            "kubernetes.io/service-account-token",
            **{"kubernetes.io/service-account.name": "agent-agent"},
        )
    )
    assert "only Opaque Secrets" in body
    secret(org_ns, f"opaque-{uuid.uuid4().hex[:6]}")  # positive control
