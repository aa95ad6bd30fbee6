"""Each component identity bounded by admission, not only by RBAC; and the agent bounds an
org admin cannot cross. From the attacker's side: a stolen operator or platform API token
(a real TokenRequest token of its ServiceAccount) and a cluster admin's kubectl (GitOps)
against the real API server with the policies of manifests/base/policies applied. Every
write is a dry run (admission runs, nothing is stored); each refusal asserts the policy's
message, and beside it the legitimate form of the same request is admitted.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client

from humanwork_core import keys
from humanwork_dev.processes import PLATFORM_NS
from tests.agents import GROUP, PLURAL, VERSION, get_instance, instance_manifest, widened_bounds
from tests.conftest import Cluster
from tests.integration.test_permissions import identities  # noqa: F401  (a fixture)
from tests.support import eventually

AGENT_IMAGE = "humanwork/agent:0.1.0"
PSS = "pod-security.kubernetes.io/"
PLATFORM_POD_REFUSALS = (
    # two policies refuse the operator's Deployment of the platform's ServiceAccount in
    # humanwork-system; the API server names whichever it evaluated first
    "writes nothing in humanwork-system",
    "only as the ServiceAccount of the AgentInstance that owns it",
)


def _refused(call: Callable[[], Any]) -> str:
    with pytest.raises(client.ApiException) as caught:
        call()
    assert caught.value.status in (403, 422), caught.value.body
    return str(caught.value.body)


def _deployment(
    owner: dict[str, Any] | None, account: str, image: str = AGENT_IMAGE, **pod: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"try-{uuid.uuid4().hex[:6]}"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "AgentInstance",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    container = {"name": "agent", "image": image, **pod.pop("container", {})}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": meta,
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "try"}},
            "template": {
                "metadata": {"labels": {"app": "try"}},
                "spec": {"serviceAccountName": account, "containers": [container], **pod},
            },
        },
    }


def test_a_stolen_operator_token_runs_no_pod_but_an_agent_in_its_org(
    cluster: Cluster,
    identities: dict[str, Any],  # noqa: F811
    make_namespace: Callable[..., str],
) -> None:
    apps = client.AppsV1Api(identities["clients"]["operator"])
    ns = identities["namespaces"]["org"]
    owner = get_instance(cluster, ns)

    def deploy(where: str, body: dict[str, Any]) -> Any:
        return apps.create_namespaced_deployment(where, body, dry_run="All")

    # the platform's ServiceAccount in humanwork-system: it would write decisions
    body = _refused(lambda: deploy(PLATFORM_NS, _deployment(None, "humanwork-platform-api")))
    assert any(reason in body for reason in PLATFORM_POD_REFUSALS), body
    for where in ("default", make_namespace("plain")):
        body = _refused(lambda w=where: deploy(w, _deployment(owner, "agent-agent")))
        assert "has no humanwork.io/org-id label" in body
    body = _refused(lambda: deploy(ns, _deployment(owner, "default")))
    assert "only as the ServiceAccount of the AgentInstance that owns it" in body
    body = _refused(lambda: deploy(ns, _deployment(None, "agent-agent")))
    assert "only as the ServiceAccount of the AgentInstance that owns it" in body
    body = _refused(lambda: deploy(ns, _deployment(owner, "agent-agent", "evil/miner:1")))
    assert "only images the platform allows" in body and "evil/miner:1" in body
    privileged = {"container": {"securityContext": {"privileged": True}}}
    body = _refused(lambda: deploy(ns, _deployment(owner, "agent-agent", **privileged)))
    assert "no pod with a host namespace" in body
    body = _refused(lambda: deploy(ns, _deployment(owner, "agent-agent", hostNetwork=True)))
    assert "no pod with a host namespace" in body
    anywhere = {"tolerations": [{"operator": "Exists"}]}
    body = _refused(lambda: deploy(ns, _deployment(owner, "agent-agent", **anywhere)))
    assert "tolerations, node selectors and runtime classes the agent bounds allow" in body
    # positive control: the agent's own Deployment, as the operator writes it
    deploy(ns, _deployment(owner, "agent-agent"))


def test_a_stolen_operator_token_writes_in_humanwork_system_only_its_own(
    identities: dict[str, Any],  # noqa: F811
) -> None:
    api = identities["clients"]["operator"]
    core, rbac = client.CoreV1Api(api), client.RbacAuthorizationV1Api(api)
    net = client.NetworkingV1Api(api)
    meta = client.V1ObjectMeta(name=f"try-{uuid.uuid4().hex[:6]}")
    attempts: list[Callable[[], Any]] = [
        lambda: core.patch_namespaced_config_map(
            "humanwork-platform-config", PLATFORM_NS, {"data": {"x": "y"}}, dry_run="All"
        ),
        lambda: core.create_namespaced_config_map(
            PLATFORM_NS, client.V1ConfigMap(metadata=meta), dry_run="All"
        ),
        lambda: core.patch_namespaced_service(
            "humanwork-platform-api", PLATFORM_NS, {"spec": {"selector": {"a": "b"}}}, dry_run="All"
        ),
        lambda: core.create_namespaced_service_account(
            PLATFORM_NS, client.V1ServiceAccount(metadata=meta), dry_run="All"
        ),
        lambda: net.create_namespaced_network_policy(
            PLATFORM_NS,
            client.V1NetworkPolicy(metadata=meta, spec=client.V1NetworkPolicySpec(pod_selector={})),
            dry_run="All",
        ),
        lambda: rbac.create_namespaced_role(
            PLATFORM_NS, client.V1Role(metadata=meta, rules=[]), dry_run="All"
        ),
    ]
    for attempt in attempts:
        assert "writes nothing in humanwork-system but its Leases" in _refused(attempt)
    # positive controls: its Lease, its published ConfigMaps, an Event
    coordination = client.CoordinationV1Api(api)
    coordination.create_namespaced_lease(
        PLATFORM_NS, client.V1Lease(metadata=meta, spec=client.V1LeaseSpec()), dry_run="All"
    )
    core.patch_namespaced_config_map(
        "humanwork-agent-jwks", PLATFORM_NS, {"metadata": {"labels": {"x": "y"}}}, dry_run="All"
    )
    event = client.CoreV1Event(
        metadata=meta,
        involved_object=client.V1ObjectReference(kind="Pod", name="x", namespace=PLATFORM_NS),
    )
    core.create_namespaced_event(PLATFORM_NS, event, dry_run="All")


def test_a_stolen_operator_token_grants_agents_nothing_more(
    identities: dict[str, Any],  # noqa: F811
) -> None:
    rbac = client.RbacAuthorizationV1Api(identities["clients"]["operator"])
    ns = identities["namespaces"]["org"]

    def role(*rules: dict[str, Any]) -> Any:
        body = {"metadata": {"name": f"try-{uuid.uuid4().hex[:6]}"}, "rules": list(rules)}
        return rbac.create_namespaced_role(ns, body, dry_run="All")

    wider = {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["create"]}
    assert "grant only what agents hold" in _refused(lambda: role(wider))
    status = {"apiGroups": [GROUP], "resources": ["agentictasks/status"], "verbs": ["get"]}
    # held by the operator (so RBAC's escalation check lets it through), not by agents
    more = {"apiGroups": [GROUP], "resources": ["agentictasks"], "verbs": ["get", "delete"]}
    assert "grant only what agents hold" in _refused(lambda: role(more))
    role(status)  # positive control: what agents hold


def test_a_stolen_operator_token_lowers_no_pod_security_level(
    identities: dict[str, Any],  # noqa: F811
    make_namespace: Callable[..., str],
) -> None:
    core = client.CoreV1Api(identities["clients"]["operator"])
    org_ns = identities["namespaces"]["org"]

    def label(ns: str, labels: dict[str, str | None]) -> Any:
        return core.patch_namespace(ns, {"metadata": {"labels": labels}}, dry_run="All")

    for labels in (
        {f"{PSS}enforce": "privileged"},
        {f"{PSS}enforce": None},
        {f"{PSS}enforce-version": "v1.20"},
    ):
        body = _refused(lambda ls=labels: label(org_ns, ls))
        assert "may not change or remove the Pod Security labels" in body
    body = _refused(lambda: label("default", {f"{PSS}enforce": "restricted"}))
    assert "changes only org namespaces" in body
    fresh = make_namespace("org", labels={"humanwork.io/org-id": str(uuid.uuid4())})
    body = _refused(lambda: label(fresh, {f"{PSS}enforce": "baseline"}))
    assert "only adds those it lacks, with the restricted values" in body
    # positive control: what it patches namespaces for, the restricted labels one lacks
    label(fresh, {f"{PSS}enforce": "restricted", f"{PSS}enforce-version": "latest"})


def test_a_stolen_platform_token_makes_only_restricted_org_namespaces(
    identities: dict[str, Any],  # noqa: F811
) -> None:
    core = client.CoreV1Api(identities["clients"]["platform"])
    org = {"humanwork.io/org-id": str(uuid.uuid4())}

    def namespace(name: str, labels: dict[str, str]) -> Any:
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels=labels))
        return core.create_namespace(body, dry_run="All")

    suffix = uuid.uuid4().hex[:6]
    body = _refused(lambda: namespace(f"org-{suffix}", {**org, f"{PSS}enforce": "privileged"}))
    assert "only at the restricted Pod Security level" in body
    body = _refused(lambda: namespace(f"org-{suffix}", org))
    assert "only at the restricted Pod Security level" in body
    restricted = {f"{PSS}enforce": "restricted"}
    body = _refused(lambda: namespace(f"evil-{suffix}", {**org, **restricted}))
    assert "creates only org namespaces" in body
    body = _refused(lambda: namespace(f"org-{suffix}", restricted))
    assert "creates only org namespaces" in body
    namespace(f"org-{suffix}", {**org, **restricted})  # positive control: the least it needs
    # and as `POST /orgs` makes an org: every restricted label the operator would add
    namespace(f"org-{suffix}", {**org, **keys.RESTRICTED_NAMESPACE_LABELS})


BEYOND: list[tuple[dict[str, Any], str]] = [
    ({"image": "evil/miner:1"}, "spec.image evil/miner:1 is beyond the bounds"),
    (
        {"egress": {"extra": [{"cidr": "169.254.169.254/32", "ports": [80]}]}},
        "spec.egress 169.254.169.254/32 is beyond the bounds",
    ),
    ({"egress": {"llmCIDRs": ["0.0.0.0/0"]}}, "spec.egress 0.0.0.0/0 is beyond the bounds"),
    ({"egress": {"llmCIDRs": ["10.96.0.0/12"]}}, "spec.egress 10.96.0.0/12 is beyond the bounds"),
    ({"egress": {"llmCIDRs": ["127.0.0.0/8"]}}, "spec.egress 127.0.0.0/8 is beyond the bounds"),
    ({"egress": {"llmCIDRs": ["::ffff:a9fe:a9fe/128"]}}, "is beyond the bounds"),
    ({"tolerations": [{"operator": "Exists"}]}, "spec.tolerations (every taint) is beyond"),
    (
        {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
        "spec.nodeSelector node-role.kubernetes.io/control-plane= is beyond the bounds",
    ),
    ({"runtimeClassName": "unconfined"}, "spec.runtimeClassName unconfined is beyond the bounds"),
    (
        {"resources": {"limits": {"cpu": "64", "memory": "512Mi"}}},
        "64 is beyond the bounds: above the most an agent may have (agentMaxCPU: 2)",
    ),
    (
        {"resources": {"requests": {"cpu": "250m", "memory": "64Gi"}}},
        "spec.resources memory 64Gi",
    ),
]


@pytest.mark.parametrize(("spec", "message"), BEYOND, ids=[m[:28] for _, m in BEYOND])
def test_no_requester_writes_an_agent_beyond_the_bounds(
    cluster: Cluster,
    identities: dict[str, Any],  # noqa: F811
    spec: dict[str, Any],
    message: str,
) -> None:
    """A cluster admin (kubectl, GitOps) and the platform API (for an org admin) alike:
    on create and on a change of an existing agent's spec."""
    ns, org_id = identities["namespaces"]["org"], identities["org_id"]
    name = f"bound-{uuid.uuid4().hex[:6]}"
    for api in (cluster.api, identities["clients"]["platform"]):
        objects = client.CustomObjectsApi(api)
        body = _refused(
            lambda o=objects: o.create_namespaced_custom_object(
                GROUP,
                VERSION,
                ns,
                PLURAL,
                instance_manifest(ns, org_id, name, **spec),
                dry_run="All",
            )
        )
        assert message in body, body
        body = _refused(
            lambda o=objects: o.patch_namespaced_custom_object(
                GROUP, VERSION, ns, PLURAL, "agent", {"spec": spec}, dry_run="All"
            )
        )
        assert message in body, body
        # positive control: the same agent within the bounds
        objects.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, instance_manifest(ns, org_id, name), dry_run="All"
        )


def test_the_platform_team_widens_the_bounds_and_only_it(
    cluster: Cluster,
    identities: dict[str, Any],  # noqa: F811
) -> None:
    ns, org_id = identities["namespaces"]["org"], identities["org_id"]
    admin = client.CustomObjectsApi(cluster.api)
    spec = {
        "image": "registry.example/agent@sha256:" + "0" * 64,
        "tolerations": [{"key": "humanwork.dev/sandbox", "operator": "Exists"}],
        "egress": {"extra": [{"cidr": "10.213.0.0/24", "ports": [8080]}]},
    }
    manifest = instance_manifest(ns, org_id, f"wide-{uuid.uuid4().hex[:6]}", **spec)

    def create() -> Any:
        return admin.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, manifest, dry_run="All"
        )

    assert "beyond the bounds" in _refused(create)
    with widened_bounds(
        cluster,
        agentImages="humanwork/agent:*,humanwork/agent@*,registry.example/agent@sha256:*",
        agentTolerationKeys="humanwork.dev/sandbox",
        agentEgressAllowedCIDRs="10.213.0.0/16",
    ):
        eventually(create, timeout=30)
        # the platform's and the operator's identities cannot widen them themselves
        for who in ("platform", "operator"):
            _refused(
                lambda c=identities["clients"][who]: client.CoreV1Api(
                    c
                ).patch_namespaced_config_map(
                    "humanwork-admission",
                    PLATFORM_NS,
                    {"data": {"agentTolerationKeys": "*"}},
                    dry_run="All",
                )
            )

    def refused_again() -> bool:
        try:
            create()
        except client.ApiException as exc:
            return "beyond the bounds" in str(exc.body)
        return False

    eventually(refused_again, timeout=30)


def test_no_component_identity_runs_a_pod_as_the_platform(
    identities: dict[str, Any],  # noqa: F811
) -> None:
    """Every identity (the operator, the platform API, an agent, a ServiceAccount of no
    role) tries to run a pod in humanwork-system as the platform API's ServiceAccount, the
    one that writes decisions: RBAC refuses the platform, the agent and nobody, admission
    the operator (whose ClusterRole would allow it)."""
    for who, reasons in (
        ("operator", PLATFORM_POD_REFUSALS),
        ("platform", ("cannot create resource",)),
        ("agent", ("cannot create resource",)),
        ("nobody", ("cannot create resource",)),
    ):
        apps = client.AppsV1Api(identities["clients"][who])
        body = _refused(
            lambda a=apps: a.create_namespaced_deployment(
                PLATFORM_NS, _deployment(None, "humanwork-platform-api"), dry_run="All"
            )
        )
        assert any(reason in body for reason in reasons), (who, body)
