"""The operator on the real control plane: provision, isolate, rotate, configure, scale,
restore, tear down and restart, running as a process under its own least-privilege
ServiceAccount (manifests/base/operator/rbac.yaml), with the admission policies on."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from kubernetes import client

from humanwork_core import tokens
from humanwork_dev.processes import PLATFORM_NS, OperatorProcess
from tests.agents import (
    GROUP,
    PLURAL,
    VERSION,
    agent_token,
    condition,
    create_instance,
    get_instance,
    wait_phase,
    wait_rotated,
)
from tests.conftest import Cluster
from tests.support import eventually, service_account_token

REQUESTS = "humanwork_operator_api_requests_total"
CHILDREN = [
    ("ServiceAccount", "agent-agent"),
    ("Role", "agent-agent"),
    ("RoleBinding", "agent-agent"),
    ("Secret", "agent-agent-token"),
    ("Secret", "agent-agent-callback"),
    ("ConfigMap", "agent-agent-config"),
    ("NetworkPolicy", "agent-agent"),
    ("Service", "agent-agent"),
    ("Deployment", "agent-agent"),
]


def read_child(cluster: Cluster, kind: str, ns: str, name: str) -> Any:
    core, rbac = client.CoreV1Api(cluster.api), client.RbacAuthorizationV1Api(cluster.api)
    readers: dict[str, Callable[[str, str], Any]] = {
        "ServiceAccount": core.read_namespaced_service_account,
        "Secret": core.read_namespaced_secret,
        "ConfigMap": core.read_namespaced_config_map,
        "Service": core.read_namespaced_service,
        "Role": rbac.read_namespaced_role,
        "RoleBinding": rbac.read_namespaced_role_binding,
        "NetworkPolicy": client.NetworkingV1Api(cluster.api).read_namespaced_network_policy,
        "Deployment": client.AppsV1Api(cluster.api).read_namespaced_deployment,
    }
    return readers[kind](name, ns)


def test_provisions_a_hardened_isolated_agent(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    created = create_instance(cluster, ns, org_id)
    obj = wait_phase(cluster, ns, "Ready")
    uid = created["metadata"]["uid"]

    for kind, name in CHILDREN:
        child = read_child(cluster, kind, ns, name)
        refs = child.metadata.owner_references
        assert [(r.kind, r.uid, r.controller) for r in refs] == [("AgentInstance", uid, True)]
        labels = child.metadata.labels
        assert labels["app.kubernetes.io/instance"] == "agent"
        assert labels["app.kubernetes.io/managed-by"] == "humanwork-operator"
        assert labels["humanwork.io/org-id"] == org_id

    status = obj["status"]
    assert status["readyReplicas"] == 1 and status["replicas"] == 1
    assert status["endpoint"] == f"http://agent-agent.{ns}.svc:8080"
    assert status["observedGeneration"] == obj["metadata"]["generation"]
    for kind in ("Ready", "TokenValid", "NetworkIsolated", "ConfigApplied"):
        assert condition(obj, kind)["observedGeneration"] == obj["metadata"]["generation"]
    assert condition(obj, "Ready")["status"] == "True"
    assert condition(obj, "TokenValid")["status"] == "True"
    assert condition(obj, "NetworkIsolated")["status"] == "True"

    # the pod passed the restricted Pod Security Standard the operator set on the namespace
    labels = client.CoreV1Api(cluster.api).read_namespace(ns).metadata.labels
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    pods = (
        client.CoreV1Api(cluster.api)
        .list_namespaced_pod(ns, label_selector="app.kubernetes.io/instance=agent")
        .items
    )
    assert [p.status.phase for p in pods] == ["Running"]
    node = client.CoreV1Api(cluster.api).read_node(pods[0].spec.node_name)
    assert node.metadata.annotations["kwok.x-k8s.io/node"] == "fake"

    spec = json.dumps(client.ApiClient().sanitize_for_serialization(pods[0].spec)).upper()
    for secret_word in ("DATABASE", "POSTGRES", "REDIS", "SHOPIFY_", "AMAZON_"):
        assert secret_word not in spec

    def events() -> dict[str, str]:
        listed = client.CoreV1Api(cluster.api).list_namespaced_event(
            ns, field_selector="involvedObject.kind=AgentInstance"
        )
        told = {e.reason: e.message for e in listed.items}
        return told if {"Provisioned", "NamespaceHardened"} <= set(told) else {}

    # the namespace lacked the Pod Security labels; the provisioning's Event names the token
    told = eventually(events, timeout=20)
    assert status["token"]["jti"] in told["Provisioned"], told
    assert "TokenIssued" not in told, told


def _published_jwks(cluster: Cluster) -> dict[str, Any]:
    cm = client.CoreV1Api(cluster.api).read_namespaced_config_map(
        "humanwork-agent-jwks", PLATFORM_NS
    )
    doc: dict[str, Any] = json.loads(cm.data["jwks.json"])
    return doc


def test_agent_token_verifies_with_the_published_keys_and_forgeries_fail(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, org_id = ready_agent
    obj = get_instance(cluster, ns)
    token, keys = agent_token(cluster, ns), _published_jwks(cluster)
    minted = tokens.read_minted_token(token)
    now = minted.claims.issued_at + timedelta(seconds=5)

    claims = tokens.verify_agent_token(
        token, keys, now=now, org_id=org_id, accepted_jtis={obj["status"]["token"]["jti"]}
    )
    assert claims.subject == f"{ns}/agent" and claims.role == "agent"
    assert set(claims.scopes) >= {"tools:execute", "callbacks:write"}

    with pytest.raises(tokens.TokenError) as other_org:
        tokens.verify_agent_token(token, keys, now=now, org_id=str(uuid.uuid4()))
    assert other_org.value.code == "token_wrong_org"

    with pytest.raises(tokens.TokenError) as expired:
        tokens.verify_agent_token(token, keys, now=minted.claims.expires_at + timedelta(hours=1))
    assert expired.value.code == "token_expired"

    # an attacker's key, even one claiming the operator's kid, does not verify
    forger = tokens.generate_signing_key()
    forged = tokens.mint_agent_token(
        forger, agent_id=f"{ns}/agent", org_id=org_id, namespace=ns, ttl_seconds=600, now=now
    ).token
    with pytest.raises(tokens.TokenError) as unknown:
        tokens.verify_agent_token(forged, keys, now=now)
    assert unknown.value.code == "token_unknown_key"
    header, payload, _sig = forged.split(".")
    real_header = token.split(".")[0]
    with pytest.raises(tokens.TokenError) as bad_sig:
        tokens.verify_agent_token(f"{real_header}.{payload}.{_sig}", keys, now=now)
    assert bad_sig.value.code == "token_invalid_signature"
    assert header != real_header


def test_agent_identity_sees_only_its_own_tasks(
    cluster: Cluster,
    operator: OperatorProcess,
    org: tuple[str, str],
    make_namespace: Callable[..., str],
) -> None:
    ns, org_id = org
    create_instance(cluster, ns, org_id)
    wait_phase(cluster, ns, "Ready")
    other_org = str(uuid.uuid4())
    other_ns = make_namespace("org", labels={"humanwork.io/org-id": other_org})
    task = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "AgenticTask",
        "metadata": {"name": "t1"},
        "spec": {
            "orgId": org_id,
            "agentRef": {"name": "agent"},
            "conversationId": str(uuid.uuid4()),
            "description": "Reconcile October orders",
            "requestedBy": "ops@example.com",
            "steps": [
                {
                    "id": "read",
                    "description": "Read orders",
                    "kind": "action",
                    "tool": "amazon_query",
                    "parameters": {"month": "2026-10"},
                    "risk": "low",
                }
            ],
        },
    }
    crd = client.CustomObjectsApi(cluster.api)
    crd.create_namespaced_custom_object(GROUP, VERSION, ns, "agentictasks", task)
    crd.create_namespaced_custom_object(
        GROUP,
        VERSION,
        other_ns,
        "agentictasks",
        {**task, "spec": {**task["spec"], "orgId": other_org}},
    )

    token = service_account_token(cluster.api, ns, "agent-agent")
    as_agent = cluster.client_for_token(token)
    agent_crd = client.CustomObjectsApi(as_agent)

    listed = agent_crd.list_namespaced_custom_object(GROUP, VERSION, ns, "agentictasks")
    assert [t["metadata"]["name"] for t in listed["items"]] == ["t1"]
    watched = agent_crd.list_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        "agentictasks",
        watch=True,
        timeout_seconds=1,
        _preload_content=False,
    )
    assert watched.status == 200
    patched = agent_crd.patch_namespaced_custom_object_status(
        GROUP, VERSION, ns, "agentictasks", "t1", {}
    )
    assert patched["metadata"]["name"] == "t1"

    refusals: list[Callable[[], Any]] = [
        lambda: client.CoreV1Api(as_agent).list_namespaced_secret(ns),
        lambda: client.CoreV1Api(as_agent).read_namespaced_secret("llm", ns),
        lambda: agent_crd.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL),
        lambda: agent_crd.list_namespaced_custom_object(GROUP, VERSION, other_ns, "agentictasks"),
        lambda: agent_crd.get_namespaced_custom_object(
            GROUP, VERSION, other_ns, "agentictasks", "t1"
        ),
        lambda: client.CoreV1Api(as_agent).list_namespaced_config_map(ns),
        lambda: agent_crd.delete_namespaced_custom_object(GROUP, VERSION, ns, "agentictasks", "t1"),
    ]
    for attempt in refusals:
        with pytest.raises(client.ApiException) as refused:
            attempt()
        assert refused.value.status == 403
        assert f"system:serviceaccount:{ns}:agent-agent" in refused.value.body


def test_scale_and_pause_drive_the_deployment(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, _org_id = ready_agent
    apps = client.AppsV1Api(cluster.api)

    cluster.kubectl("-n", ns, "scale", "agentinstance/agent", "--replicas=3")
    eventually(lambda: apps.read_namespaced_deployment("agent-agent", ns).spec.replicas == 3)
    eventually(lambda: get_instance(cluster, ns)["status"].get("readyReplicas") == 3)

    client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "agent", {"spec": {"paused": True}}
    )
    eventually(lambda: apps.read_namespaced_deployment("agent-agent", ns).spec.replicas == 0)
    paused = wait_phase(cluster, ns, "Paused")
    assert condition(paused, "Ready")["reason"] == "Paused"


def test_a_deployment_turning_ready_updates_only_the_status(
    cluster: Cluster, operator: OperatorProcess, ready_agent: tuple[str, str]
) -> None:
    """The agents' Deployment reaching more ready replicas reaches the instance's status by
    the readiness path: the counts, phase and Ready condition from the Deployment's event,
    the rest kept, with no full reconcile of its own (which would read the token Secret
    again: only the scale's reconcile reads it)."""
    ns, _org_id = ready_agent
    reconciles, requests = "humanwork_operator_reconciles_total", REQUESTS

    def counts() -> tuple[float, float, float]:
        return (
            operator.metric(reconciles, trigger="readiness", result="ok"),
            operator.metric(requests, method="GET", resource="secrets"),
            operator.metric(requests, method="PATCH", resource="deployments"),
        )

    before = counts()
    token = get_instance(cluster, ns)["status"]["token"]

    cluster.kubectl("-n", ns, "scale", "agentinstance/agent", "--replicas=2")
    scaled = eventually(
        lambda: (s := get_instance(cluster, ns)["status"]).get("readyReplicas") == 2 and s,
        timeout=30,
    )
    assert scaled["phase"] == "Ready" and scaled["replicas"] == 2
    ready = next(c for c in scaled["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["message"]) == ("True", "2/2 agent replicas ready")
    assert scaled["token"] == token  # what the full reconcile reported is kept
    assert {c["type"] for c in scaled["conditions"]} == {
        "Ready",
        "TokenValid",
        "NetworkIsolated",
        "ConfigApplied",
    }
    readiness, secret_reads, deployment_applies = (
        b - a for a, b in zip(before, counts(), strict=True)
    )
    assert readiness >= 1
    assert deployment_applies >= 1  # the scale's own reconcile (the positive control)
    assert secret_reads == 1  # that reconcile alone: none for the readiness


def test_children_deleted_or_edited_by_hand_are_restored(
    cluster: Cluster, operator: OperatorProcess, ready_agent: tuple[str, str]
) -> None:
    ns, _org_id = ready_agent
    core, net = client.CoreV1Api(cluster.api), client.NetworkingV1Api(cluster.api)
    apps = client.AppsV1Api(cluster.api)
    old_uid = net.read_namespaced_network_policy("agent-agent", ns).metadata.uid

    net.delete_namespaced_network_policy("agent-agent", ns)
    core.delete_namespaced_service("agent-agent", ns)
    restored = eventually(lambda: net.read_namespaced_network_policy("agent-agent", ns), timeout=15)
    assert restored.metadata.uid != old_uid
    assert eventually(lambda: core.read_namespaced_service("agent-agent", ns), timeout=15)

    apps.patch_namespaced_deployment("agent-agent", ns, {"spec": {"replicas": 4}})
    eventually(
        lambda: apps.read_namespaced_deployment("agent-agent", ns).spec.replicas == 1, timeout=15
    )
    assert "humanwork_operator_children_restored_total" in operator.metrics()


def test_a_child_stripped_of_its_labels_is_restored(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    """Issue 17: the API server filters the operator's watches of children by their labels,
    so a child whose labels are taken away leaves the watch as a deletion, and the owner's
    reconcile applies them again (with a filter on the operator's side only, the edit was
    dropped, and later edits of the unlabelled child went unseen)."""
    ns, _org_id = ready_agent
    net = client.NetworkingV1Api(cluster.api)
    component = "app.kubernetes.io/component"
    net.patch_namespaced_network_policy(
        "agent-agent",
        ns,
        [{"op": "remove", "path": "/metadata/labels/" + component.replace("/", "~1")}],
    )
    assert component not in (
        net.read_namespaced_network_policy("agent-agent", ns).metadata.labels or {}
    )
    eventually(
        lambda: (
            (net.read_namespaced_network_policy("agent-agent", ns).metadata.labels or {}).get(
                component
            )
            == "agent"
        ),
        timeout=15,
    )


def test_rotation_on_request_keeps_the_previous_token_in_grace(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, _org_id = ready_agent
    first = get_instance(cluster, ns)["status"]["token"]

    client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "agent",
        {"metadata": {"annotations": {"humanwork.io/rotate-token": "now"}}},
    )

    second = wait_rotated(cluster, ns, first["jti"], timeout=20)
    assert second["previousJti"] == first["jti"]
    assert second["previousGraceEndsAt"] > second["issuedAt"]
    assert tokens.read_minted_token(agent_token(cluster, ns)).claims.jti == second["jti"]
    annotations = get_instance(cluster, ns)["metadata"].get("annotations") or {}
    assert "humanwork.io/rotate-token" not in annotations
    reasons = {
        e.reason
        for e in client.CoreV1Api(cluster.api)
        .list_namespaced_event(ns, field_selector="involvedObject.kind=AgentInstance")
        .items
    }
    assert "TokenRotated" in reasons


def test_configuration_change_updates_the_config_without_restarting_pods(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, _org_id = ready_agent
    before = get_instance(cluster, ns)
    apps, core = client.AppsV1Api(cluster.api), client.CoreV1Api(cluster.api)
    template_before = apps.read_namespaced_deployment("agent-agent", ns).spec.template
    pods_before = {p.metadata.name for p in core.list_namespaced_pod(ns).items}

    client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "agent",
        # an emoji (outside the BMP) too: the operator's apply body travels as UTF-8
        {"spec": {"specialist": {"name": "Bob \U0001f9fe", "systemPrompt": "You audit refunds."}}},
    )

    def new_hash() -> str | None:
        h = get_instance(cluster, ns)["status"]["configHash"]
        return str(h) if h != before["status"]["configHash"] else None

    config_hash = eventually(new_hash, timeout=20)
    cm = core.read_namespaced_config_map("agent-agent-config", ns)
    assert "You audit refunds." in cm.data["config.json"]
    assert json.loads(cm.data["config.json"])["specialist"]["name"] == "Bob \U0001f9fe"
    assert (
        config_hash in json.dumps(cm.data)
        or cm.metadata.annotations.get("humanwork.io/config-hash") == config_hash
    )
    assert apps.read_namespaced_deployment("agent-agent", ns).spec.template == template_before
    assert {p.metadata.name for p in core.list_namespaced_pod(ns).items} == pods_before
    assert condition(get_instance(cluster, ns), "ConfigApplied")["reason"] == "AwaitingAgent"

    # the agent reports the hash it applied (through the platform API, under its identity)
    token = service_account_token(cluster.api, PLATFORM_NS, "humanwork-platform-api")
    as_platform = client.CustomObjectsApi(cluster.client_for_token(token))
    as_platform.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "agent",
        {"metadata": {"annotations": {"humanwork.io/config-applied": config_hash}}},
    )
    applied = eventually(
        lambda: condition(get_instance(cluster, ns), "ConfigApplied")["status"] == "True"
    )
    assert applied
    assert condition(get_instance(cluster, ns), "ConfigApplied")["reason"] == "AgentAcknowledged"


def test_deleting_the_instance_revokes_its_tokens_and_collects_every_child(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, _org_id = ready_agent
    ready = get_instance(cluster, ns)
    jti = ready["status"]["token"]["jti"]
    # no finalizer: deleting an AgentInstance never waits for the operator to be up
    assert not ready["metadata"].get("finalizers")
    client.CustomObjectsApi(cluster.api).delete_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "agent"
    )

    def revoked() -> bool:
        cm = client.CoreV1Api(cluster.api).read_namespaced_config_map(
            "humanwork-agent-revocations", PLATFORM_NS
        )
        return f"jti.{jti}" in (cm.data or {})

    assert eventually(revoked, timeout=10)

    def all_gone() -> bool:
        for kind, name in CHILDREN:
            try:
                read_child(cluster, kind, ns, name)
            except client.ApiException as exc:
                if exc.status == 404:
                    continue
                raise
            return False
        return True

    assert eventually(all_gone, timeout=60)


def test_an_org_label_change_stops_the_operator_from_serving_the_instance(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    ns, _org_id = ready_agent
    client.CoreV1Api(cluster.api).patch_namespace(
        ns, {"metadata": {"labels": {"humanwork.io/org-id": str(uuid.uuid4())}}}
    )
    # the admission policy now refuses every write to the instance; the operator notices at
    # its next reconcile (a child's event or the periodic resync)
    failed = eventually(
        lambda: (s := get_instance(cluster, ns)["status"])["phase"] == "Failed" and s,
        timeout=75,
    )
    ready = next(c for c in failed["conditions"] if c["type"] == "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "OrgMismatch")


def test_an_org_label_taken_away_stops_the_operator_from_serving_the_instance_at_once(
    cluster: Cluster, ready_agent: tuple[str, str]
) -> None:
    """The namespace watch is filtered by the org label on the API server's side (issue
    17), so taking the label away reaches the operator as the namespace leaving the watch:
    it reconciles the namespace's instances then, without waiting for the resync."""
    ns, _org_id = ready_agent
    client.CoreV1Api(cluster.api).patch_namespace(
        ns, [{"op": "remove", "path": "/metadata/labels/humanwork.io~1org-id"}]
    )
    failed = eventually(
        lambda: (s := get_instance(cluster, ns)["status"])["phase"] == "Failed" and s,
        timeout=20,
    )
    ready = next(c for c in failed["conditions"] if c["type"] == "Ready")
    assert ready["status"] == "False"


def test_a_killed_operator_converges_after_restart(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    core = client.CoreV1Api(cluster.api)
    create_instance(cluster, ns, org_id)
    # kill it as soon as it has minted the token, typically before the Deployment exists
    first = eventually(lambda: agent_token(cluster, ns), timeout=30, interval=0.02)
    operator.kill()
    operator.start()
    obj = wait_phase(cluster, ns, "Ready")
    secrets = core.list_namespaced_secret(ns, label_selector="app.kubernetes.io/instance=agent")
    assert sorted(s.metadata.name for s in secrets.items) == [
        "agent-agent-callback",
        "agent-agent-token",
    ]
    # the restarted operator adopted the token it had minted instead of minting another
    assert agent_token(cluster, ns) == first
    assert tokens.read_minted_token(first).claims.jti == obj["status"]["token"]["jti"]
    for kind, name in CHILDREN:
        assert read_child(cluster, kind, ns, name).metadata.owner_references
    assert 'humanwork_operator_reconciles_total{result="ok"' in operator.metrics()


def test_tokens_rotate_by_themselves_before_they_expire(
    cluster: Cluster, operator: OperatorProcess, org: tuple[str, str]
) -> None:
    ns, org_id = org
    # a 300 s token rotated 290 s before expiry is due about 10 s after issue
    create_instance(cluster, ns, org_id, token={"ttlSeconds": 300, "rotateBeforeSeconds": 290})
    first = wait_phase(cluster, ns, "Ready")["status"]["token"]

    second = wait_rotated(cluster, ns, first["jti"], timeout=40)
    assert second["previousJti"] == first["jti"]
    assert second["issuedAt"] > first["issuedAt"]
    # the old token stays valid no longer than it would have anyway
    assert second["previousGraceEndsAt"] <= first["expiresAt"]
    assert 'humanwork_operator_reconciles_total{result="ok",trigger="rotation"}' in (
        operator.metrics()
    )


def test_a_token_secret_and_the_operators_secret_binding_removed_by_hand_come_back(
    cluster: Cluster, operator: OperatorProcess, ready_agent: tuple[str, str]
) -> None:
    """The operator no longer watches Secrets (issue 12, item 6): a deleted token Secret is
    restored by the instance's next reconcile (here an annotation; otherwise the periodic
    resync), even when its own RoleBinding to the org Secrets was removed too (its read is
    refused, kopf retries, the binding is applied again)."""
    ns, _org_id = ready_agent
    core, rbac = client.CoreV1Api(cluster.api), client.RbacAuthorizationV1Api(cluster.api)
    binding = rbac.read_namespaced_role_binding("humanwork-operator-secrets", ns)
    assert binding.role_ref.name == "humanwork-operator-org-secrets"
    assert [(s.kind, s.namespace, s.name) for s in binding.subjects] == [
        ("ServiceAccount", PLATFORM_NS, "humanwork-operator")
    ]
    first = get_instance(cluster, ns)["status"]["token"]["jti"]
    rbac.delete_namespaced_role_binding("humanwork-operator-secrets", ns)
    core.delete_namespaced_secret("agent-agent-token", ns)
    client.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
        GROUP,
        VERSION,
        ns,
        PLURAL,
        "agent",
        {"metadata": {"annotations": {"humanwork.io/config-nudge": uuid.uuid4().hex}}},
    )
    restored = eventually(lambda: agent_token(cluster, ns), timeout=30)
    claims = tokens.read_minted_token(restored).claims
    assert claims.jti != first  # the deleted token is not resurrected: a new one is issued
    assert eventually(lambda: get_instance(cluster, ns)["status"]["token"]["jti"] == claims.jti)
    assert rbac.read_namespaced_role_binding("humanwork-operator-secrets", ns).subjects
