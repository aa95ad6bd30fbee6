"""The pure builders: AgentInstance in, the manifests of its sandbox out."""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent_operator import builders
from agent_operator.builders import (
    BuildError,
    children,
    config_hash,
    jwks_config_map,
    label_selector,
    missing_pod_security_labels,
    org_mismatch,
    read_signing_keys_secret,
    signing_keys_secret,
)
from agent_operator.config import OperatorSettings
from humanwork_core.resources import AgentInstance
from humanwork_core.tokens import (
    MintedToken,
    generate_signing_key,
    mint_agent_token,
    verify_agent_token,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ORG = "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17"
UID = "6b1c9f0e-1111-4222-8333-944455556666"
SETTINGS = OperatorSettings()
REPO = Path(__file__).resolve().parents[2]
CALLBACK = "c0ffee" * 10
FORBIDDEN = ("DATABASE", "POSTGRES", "REDIS", "SHOPIFY", "AMAZON")


def manifest(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgentInstance",
        "metadata": {"name": "acme-ecommerce", "namespace": "org-acme", "uid": UID},
        "spec": {
            "orgId": ORG,
            "specialist": {"name": "Bob", "systemPrompt": "You are Bob, an operations expert."},
            "model": "openai/gpt-4o",
            "temperature": 0.3,
            "confidenceThreshold": 70,
            "enabledTools": ["shopify_query", "amazon_query"],
            "maxConcurrentTasks": 3,
            "replicas": 1,
            "llm": {
                "baseURL": "https://openrouter.ai/api/v1",
                "apiKeySecretRef": {"name": "acme-llm", "key": "api-key"},
            },
            "egress": {
                "llmCIDRs": ["104.18.0.0/16"],
                "extra": [{"cidr": "203.0.113.0/24", "ports": [443, 8443]}],
            },
        },
    }
    base["spec"].update(spec)
    return base


def instance(**spec: Any) -> AgentInstance:
    return AgentInstance.from_wire(manifest(**spec))


@pytest.fixture(scope="module")
def token() -> MintedToken:
    return mint_agent_token(
        generate_signing_key(),
        agent_id="org-acme/acme-ecommerce",
        org_id=ORG,
        namespace="org-acme",
        ttl_seconds=86_400,
        now=NOW,
    )


@pytest.fixture(scope="module")
def objs(token: MintedToken) -> dict[str, dict[str, Any]]:
    return {obj["kind"] + "/" + obj["metadata"]["name"]: obj for obj in all_children(token)}


API_SERVER = [("192.0.2.10", 6443), ("192.0.2.11", 6443)]


def all_children(token: MintedToken, **spec: Any) -> list[dict[str, Any]]:
    return children(instance(**spec), SETTINGS, token, CALLBACK, API_SERVER)


def deployment(**spec: Any) -> dict[str, Any]:
    return builders.deployment(instance(**spec), SETTINGS)


def pod_spec(**spec: Any) -> dict[str, Any]:
    result: dict[str, Any] = deployment(**spec)["spec"]["template"]["spec"]
    return result


def walk(value: Any) -> Iterator[Any]:
    yield value
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from walk(item)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item)


def decode(secret: dict[str, Any], key: str) -> str:
    return base64.b64decode(secret["data"][key]).decode()


# --- Names, owners, labels ---------------------------------------------------------------


def test_children_in_apply_order(token: MintedToken) -> None:
    kinds = [(obj["kind"], obj["metadata"]["name"]) for obj in all_children(token)]
    assert kinds == [
        ("ServiceAccount", "acme-ecommerce-agent"),
        ("Role", "acme-ecommerce-agent"),
        ("RoleBinding", "acme-ecommerce-agent"),
        ("Secret", "acme-ecommerce-agent-token"),
        ("Secret", "acme-ecommerce-agent-callback"),
        ("ConfigMap", "acme-ecommerce-agent-config"),
        ("NetworkPolicy", "acme-ecommerce-agent"),
        ("Service", "acme-ecommerce-agent"),
        ("Deployment", "acme-ecommerce-agent"),
    ]


def test_every_child_is_owned_labelled_and_namespaced(token: MintedToken) -> None:
    for obj in all_children(token):
        meta = obj["metadata"]
        assert meta["namespace"] == "org-acme"
        assert meta["ownerReferences"] == [
            {
                "apiVersion": "humanwork.io/v1alpha1",
                "kind": "AgentInstance",
                "name": "acme-ecommerce",
                "uid": UID,
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]
        assert meta["labels"] == {
            "app.kubernetes.io/name": "humanwork-agent",
            "app.kubernetes.io/instance": "acme-ecommerce",
            "app.kubernetes.io/component": "agent",
            "app.kubernetes.io/part-of": "humanwork",
            "app.kubernetes.io/managed-by": "humanwork-operator",
            "humanwork.io/org-id": ORG,
        }


def test_children_are_plain_json_without_nulls(token: MintedToken) -> None:
    for obj in all_children(token):
        assert json.loads(json.dumps(obj)) == obj
        assert None not in list(walk(obj))


def test_instance_without_uid_or_namespace_is_refused(token: MintedToken) -> None:
    data = manifest()
    del data["metadata"]["uid"]
    with pytest.raises(BuildError) as caught:
        children(AgentInstance.from_wire(data), SETTINGS, token, CALLBACK)
    assert caught.value.code == "agent_instance_incomplete"
    data = manifest()
    del data["metadata"]["namespace"]
    with pytest.raises(BuildError):
        children(AgentInstance.from_wire(data), SETTINGS, token, CALLBACK)


def test_builders_do_not_mutate_their_input(token: MintedToken) -> None:
    agent = instance()
    before = copy.deepcopy(agent.to_wire())
    children(agent, SETTINGS, token, CALLBACK)
    assert agent.to_wire() == before


# --- RBAC --------------------------------------------------------------------------------


def test_role_grants_exactly_the_agent_needs(objs: dict[str, dict[str, Any]]) -> None:
    role = objs["Role/acme-ecommerce-agent"]
    granted = set()
    for rule in role["rules"]:
        assert set(rule) == {"apiGroups", "resources", "verbs"}  # no nonResourceURLs
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                for verb in rule["verbs"]:
                    granted.add((group, resource, verb))
    assert granted == {
        ("humanwork.io", "agentictasks", "get"),
        ("humanwork.io", "agentictasks", "list"),
        ("humanwork.io", "agentictasks", "watch"),
        ("humanwork.io", "agentictasks", "create"),
        ("humanwork.io", "agentictasks/status", "get"),
        ("humanwork.io", "agentictasks/status", "patch"),
    }


def test_role_binding_binds_the_agent_service_account(objs: dict[str, dict[str, Any]]) -> None:
    binding = objs["RoleBinding/acme-ecommerce-agent"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": "acme-ecommerce-agent",
    }
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "acme-ecommerce-agent", "namespace": "org-acme"}
    ]
    assert objs["ServiceAccount/acme-ecommerce-agent"]["automountServiceAccountToken"] is False


# --- The pod -----------------------------------------------------------------------------

ALLOWED_VOLUME_TYPES = {
    "configMap",
    "csi",
    "downwardAPI",
    "emptyDir",
    "ephemeral",
    "persistentVolumeClaim",
    "projected",
    "secret",
}


def restricted_violations(spec: dict[str, Any]) -> list[str]:
    """The checks of the `restricted` Pod Security Standard that a spec alone can fail."""
    problems: list[str] = []
    pod_ctx = spec.get("securityContext", {})
    for host in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(host):
            problems.append(host)
    for volume in spec.get("volumes", []):
        kinds = set(volume) - {"name"}
        if not kinds <= ALLOWED_VOLUME_TYPES:
            problems.append(f"volume {volume['name']}: {kinds}")
    if pod_ctx.get("runAsUser") == 0:
        problems.append("pod runAsUser 0")
    if pod_ctx.get("sysctls"):
        problems.append("sysctls")
    containers = spec.get("containers", []) + spec.get("initContainers", [])
    for container in containers:
        ctx = container.get("securityContext", {})
        name = container["name"]
        if ctx.get("privileged"):
            problems.append(f"{name}: privileged")
        if ctx.get("allowPrivilegeEscalation") is not False:
            problems.append(f"{name}: allowPrivilegeEscalation must be false")
        caps = ctx.get("capabilities", {})
        if "ALL" not in caps.get("drop", []):
            problems.append(f"{name}: must drop ALL capabilities")
        if set(caps.get("add", [])) - {"NET_BIND_SERVICE"}:
            problems.append(f"{name}: adds capabilities")
        if not (ctx.get("runAsNonRoot") or pod_ctx.get("runAsNonRoot")):
            problems.append(f"{name}: runAsNonRoot")
        if ctx.get("runAsUser", pod_ctx.get("runAsUser")) in (0, None):
            problems.append(f"{name}: runAsUser must be set and non-zero")
        seccomp = ctx.get("seccompProfile", pod_ctx.get("seccompProfile", {}))
        if seccomp.get("type") not in ("RuntimeDefault", "Localhost"):
            problems.append(f"{name}: seccompProfile")
        if ctx.get("procMount", "Default") != "Default":
            problems.append(f"{name}: procMount")
        for port in container.get("ports", []):
            if port.get("hostPort"):
                problems.append(f"{name}: hostPort")
        if ctx.get("readOnlyRootFilesystem") is not True:
            problems.append(f"{name}: readOnlyRootFilesystem (DESIGN section 5)")
    return problems


def test_deployment_meets_the_restricted_profile() -> None:
    assert restricted_violations(pod_spec()) == []


def test_the_restricted_checker_catches_violations() -> None:
    spec = pod_spec()
    spec["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    spec["volumes"].append({"name": "host", "hostPath": {"path": "/"}})
    spec["hostNetwork"] = True
    assert len(restricted_violations(spec)) == 3


def test_pod_uses_its_own_service_account_through_a_projected_token() -> None:
    spec = pod_spec()
    assert spec["serviceAccountName"] == "acme-ecommerce-agent"
    assert spec["automountServiceAccountToken"] is False
    assert spec["enableServiceLinks"] is False  # no *_SERVICE_HOST of other services
    projected = next(v for v in spec["volumes"] if v["name"] == "kube-api-access")["projected"]
    token_source = projected["sources"][0]["serviceAccountToken"]
    assert 600 <= token_source["expirationSeconds"] <= 86_400


def test_secrets_are_read_only_files_under_var_run_humanwork() -> None:
    spec = pod_spec()
    container = spec["containers"][0]
    mounts = {m["name"]: m for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in spec["volumes"]}
    secret_volumes = {
        name: v["secret"]["secretName"] for name, v in volumes.items() if "secret" in v
    }
    assert set(secret_volumes.values()) == {
        "acme-ecommerce-agent-token",
        "acme-ecommerce-agent-callback",
    }
    for name in secret_volumes:
        assert mounts[name]["readOnly"] is True
        assert mounts[name]["mountPath"].startswith("/var/run/humanwork/")
    for mount in container["volumeMounts"]:
        assert "subPath" not in mount  # so rotated tokens and new config reach the pod
        assert mount.get("readOnly") is True or mount["mountPath"] == "/tmp"
    assert volumes[mounts["tmp"]["name"]]["emptyDir"]
    assert mounts["tmp"]["mountPath"] == "/tmp"
    env = {e["name"]: e for e in container["env"]}
    assert env["HUMANWORK_TOKEN_FILE"]["value"] == "/var/run/humanwork/token/token"
    assert env["HUMANWORK_CALLBACK_SECRET_FILE"]["value"] == "/var/run/humanwork/callback/secret"


def test_environment_names_the_agent_and_holds_only_the_llm_key() -> None:
    container = pod_spec()["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    assert env["HUMANWORK_PLATFORM_URL"]["value"] == (
        "http://humanwork-platform-api.humanwork-system.svc:8000"
    )
    assert env["HUMANWORK_AGENT_ID"]["value"] == "org-acme/acme-ecommerce"
    assert env["HUMANWORK_ORG_ID"]["value"] == ORG
    secret_refs = [e for e in container["env"] if "valueFrom" in e]
    assert secret_refs == [
        {
            "name": "HUMANWORK_LLM_API_KEY",
            "valueFrom": {
                "secretKeyRef": {"name": "acme-llm", "key": "api-key", "optional": False}
            },
        }
    ]
    assert "envFrom" not in container


def test_no_database_cache_or_third_party_credential_anywhere(token: MintedToken) -> None:
    # The org uses Shopify and Amazon tools: they may appear in its config, never in its pod.
    assert "shopify_query" in instance().spec.enabled_tools
    deploy = deployment()
    container = deploy["spec"]["template"]["spec"]["containers"][0]
    names_and_values = [e["name"] for e in container["env"]] + [
        json.dumps(e.get("value", e.get("valueFrom"))) for e in container["env"]
    ]
    volumes = deploy["spec"]["template"]["spec"]["volumes"]
    for text in names_and_values + [json.dumps(v) for v in volumes] + [json.dumps(deploy)]:
        for word in FORBIDDEN:
            assert word not in text.upper(), f"{word} in {text[:200]}"
    for obj in all_children(token):
        if obj["kind"] == "Secret":
            assert set(obj["data"]) <= {"token", "kid", "jti", "expiresAt", "secret"}


def test_probes_hit_health_on_the_agent_port() -> None:
    container = pod_spec()["containers"][0]
    assert container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}]
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == "/v1/health"
        assert container[probe]["httpGet"]["port"] == "http"


def test_a_new_agent_is_probed_ready_soon_and_not_dropped_on_one_slow_answer() -> None:
    ready = pod_spec()["containers"][0]["readinessProbe"]
    assert ready["initialDelaySeconds"] + ready["periodSeconds"] <= 3
    assert ready["periodSeconds"] * ready["failureThreshold"] >= 10


def test_default_and_custom_resources() -> None:
    container = pod_spec()["containers"][0]
    assert container["resources"]["requests"] == {"cpu": "250m", "memory": "256Mi"}
    custom = pod_spec(resources={"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": 2}})
    resources = custom["containers"][0]["resources"]
    assert resources["requests"] == {"cpu": "1", "memory": "1Gi"}
    assert resources["limits"] == {"cpu": "2", "memory": "512Mi"}


def test_image_defaults_to_the_operator_setting() -> None:
    assert pod_spec()["containers"][0]["image"] == SETTINGS.agent_image
    assert pod_spec(image="registry.example/agent:2")["containers"][0]["image"] == (
        "registry.example/agent:2"
    )


@pytest.mark.parametrize(
    ("replicas", "paused", "expected"), [(1, False, 1), (3, False, 3), (3, True, 0), (0, False, 0)]
)
def test_replicas_and_pause(replicas: int, paused: bool, expected: int) -> None:
    assert deployment(replicas=replicas, paused=paused)["spec"]["replicas"] == expected


def test_selectors_match_the_pod_labels(objs: dict[str, dict[str, Any]]) -> None:
    deploy = objs["Deployment/acme-ecommerce-agent"]
    pod_labels = deploy["spec"]["template"]["metadata"]["labels"]
    selector = deploy["spec"]["selector"]["matchLabels"]
    assert selector.items() <= pod_labels.items()
    assert objs["Service/acme-ecommerce-agent"]["spec"]["selector"] == selector
    policy = objs["NetworkPolicy/acme-ecommerce-agent"]
    assert policy["spec"]["podSelector"] == {"matchLabels": selector}
    assert label_selector(instance()) == ",".join(f"{k}={v}" for k, v in selector.items())


def test_config_changes_do_not_restart_pods() -> None:
    before = deployment()["spec"]["template"]
    after = deployment(model="anthropic/claude", specialist={"name": "Al", "systemPrompt": "x"})
    assert after["spec"]["template"] == before


# --- Configuration -----------------------------------------------------------------------


def test_config_map_holds_the_configuration_and_its_hash(objs: dict[str, dict[str, Any]]) -> None:
    data = objs["ConfigMap/acme-ecommerce-agent-config"]["data"]
    config = json.loads(data["config.json"])
    assert config == {
        "specialist": {"name": "Bob", "systemPrompt": "You are Bob, an operations expert."},
        "model": "openai/gpt-4o",
        "temperature": 0.3,
        "confidenceThreshold": 70,
        "enabledTools": ["amazon_query", "shopify_query"],
        "maxConcurrentTasks": 3,
    }
    assert data["configHash"] == hashlib.sha256(data["config.json"].encode()).hexdigest()
    assert data["configHash"] == config_hash(instance().spec)


def test_config_hash_ignores_scale_and_sandbox_fields() -> None:
    reference = config_hash(instance().spec)
    changes: list[dict[str, Any]] = [
        {"replicas": 5},
        {"paused": True},
        {"resources": {"requests": {"cpu": "1"}}},
        {"token": {"ttlSeconds": 3600, "rotateBeforeSeconds": 600}},
        {"egress": {}},
        {"image": "registry.example/agent:2"},
        {"enabledTools": ["amazon_query", "shopify_query"]},  # order does not matter
    ]
    for change in changes:
        assert config_hash(instance(**change).spec) == reference, change


def test_config_hash_follows_configuration_changes() -> None:
    reference = config_hash(instance().spec)
    changes = (
        {"specialist": {"name": "Bob", "systemPrompt": "You are Bob, a careful expert."}},
        {"specialist": {"name": "Rob", "systemPrompt": "You are Bob, an operations expert."}},
        {"model": "openai/gpt-4o-mini"},
        {"temperature": 0.4},
        {"confidenceThreshold": 71},
        {"enabledTools": ["shopify_query"]},
        {"maxConcurrentTasks": 4},
    )
    hashes = {config_hash(instance(**change).spec) for change in changes}
    assert reference not in hashes
    assert len(hashes) == len(changes)


# --- Network -----------------------------------------------------------------------------


def test_network_policy_ingress_only_from_the_platform(objs: dict[str, dict[str, Any]]) -> None:
    spec = objs["NetworkPolicy/acme-ecommerce-agent"]["spec"]
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    assert spec["ingress"] == [
        {
            "from": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "humanwork-system"}
                    },
                    "podSelector": {
                        "matchLabels": {"app.kubernetes.io/name": "humanwork-platform-api"}
                    },
                }
            ],
            "ports": [{"protocol": "TCP", "port": 8080}],
        }
    ]


def test_network_policy_egress_is_dns_platform_and_configured_cidrs(
    objs: dict[str, dict[str, Any]],
) -> None:
    egress = objs["NetworkPolicy/acme-ecommerce-agent"]["spec"]["egress"]
    assert egress == [
        {
            "to": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                    }
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
        {
            "to": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "humanwork-system"}
                    },
                    "podSelector": {
                        "matchLabels": {"app.kubernetes.io/name": "humanwork-platform-api"}
                    },
                }
            ],
            "ports": [{"protocol": "TCP", "port": 8000}],
        },
        {
            "to": [{"ipBlock": {"cidr": "104.18.0.0/16"}}],
            "ports": [{"protocol": "TCP", "port": 443}],
        },
        {
            "to": [{"ipBlock": {"cidr": "203.0.113.0/24"}}],
            "ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 8443}],
        },
        {  # the API server's endpoints, where the agent watches its AgenticTasks
            "to": [{"ipBlock": {"cidr": "192.0.2.10/32"}}, {"ipBlock": {"cidr": "192.0.2.11/32"}}],
            "ports": [{"protocol": "TCP", "port": 6443}],
        },
    ]


def test_the_api_server_endpoints_come_from_the_kubernetes_endpointslices() -> None:
    slices = [
        {
            "addressType": "IPv4",
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["192.0.2.10"], "conditions": {"ready": True}},
                {"addresses": ["192.0.2.12"], "conditions": {"ready": False}},  # not serving
                {"addresses": ["192.0.2.11"]},  # no conditions: ready
            ],
        },
        {
            "addressType": "IPv6",
            "ports": [{"port": 443}],
            "endpoints": [{"addresses": ["fd00::1"]}],
        },
    ]
    found = builders.api_server_endpoints(slices)
    assert found == [("192.0.2.10", 6443), ("192.0.2.11", 6443), ("fd00::1", 443)]
    rule = builders.network_policy(instance(egress={}), SETTINGS, found)["spec"]["egress"][-1]
    assert {"ipBlock": {"cidr": "fd00::1/128"}} in rule["to"]
    assert builders.api_server_endpoints([]) == []


def test_the_agent_pods_scheduling_fields_come_from_the_spec() -> None:
    assert not {"nodeSelector", "tolerations", "runtimeClassName"} & set(pod_spec())
    spec = pod_spec(
        nodeSelector={"humanwork.dev/node": "real"},
        tolerations=[
            {"key": "humanwork.dev/real-node", "operator": "Exists", "effect": "NoSchedule"}
        ],
        runtimeClassName="gvisor",
    )
    assert spec["nodeSelector"] == {"humanwork.dev/node": "real"}
    assert spec["tolerations"] == [
        {"key": "humanwork.dev/real-node", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert spec["runtimeClassName"] == "gvisor"


@pytest.mark.parametrize(
    "bad",
    [
        {"nodeSelector": {"not a key!": "x"}},
        {"nodeSelector": {"zone": "not a value!"}},
        {"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
        {"tolerations": [{"key": "k", "effect": "Sometimes"}]},
        {"runtimeClassName": "GVisor"},
    ],
)
def test_bad_scheduling_fields_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        instance(**bad)


def test_the_platform_pod_labels_are_those_of_the_platform_manifest() -> None:
    import yaml

    doc = yaml.safe_load((REPO / "manifests/base/platform/deployment.yaml").read_text())
    labels = doc["spec"]["template"]["metadata"]["labels"]
    assert builders.PLATFORM_POD_LABELS.items() <= labels.items()


def test_network_policy_without_egress_allowances_is_dns_and_platform_only() -> None:
    policy = builders.network_policy(instance(egress={}), SETTINGS)
    egress = policy["spec"]["egress"]
    assert len(egress) == 2
    assert not any("ipBlock" in peer for rule in egress for peer in rule.get("to", []))
    anywhere_dns = builders.network_policy(
        instance(egress={}), OperatorSettings(dns_namespace=None)
    )["spec"]["egress"][0]
    assert "to" not in anywhere_dns
    assert {p["port"] for p in anywhere_dns["ports"]} == {53}


# --- Secrets -----------------------------------------------------------------------------


def test_token_secret_holds_a_verifiable_token(
    objs: dict[str, dict[str, Any]], token: MintedToken
) -> None:
    secret = objs["Secret/acme-ecommerce-agent-token"]
    assert secret["type"] == "Opaque"
    assert decode(secret, "token") == token.token
    assert decode(secret, "kid") == token.claims.kid
    assert decode(secret, "jti") == token.claims.jti
    assert decode(secret, "expiresAt") == "2026-05-02T12:00:00Z"
    assert secret["metadata"]["annotations"]["humanwork.io/token-expires-at"] == (
        "2026-05-02T12:00:00Z"
    )


def test_callback_secret(objs: dict[str, dict[str, Any]], token: MintedToken) -> None:
    secret = objs["Secret/acme-ecommerce-agent-callback"]
    assert secret["type"] == "Opaque"
    assert secret["data"] == {"secret": base64.b64encode(CALLBACK.encode()).decode()}
    with pytest.raises(BuildError):
        children(instance(), SETTINGS, token, "")


def test_signing_keys_round_trip_through_their_secret(token: MintedToken) -> None:
    old, new = generate_signing_key(), generate_signing_key()
    created = [(old, NOW - timedelta(days=3)), (new, NOW)]
    secret = signing_keys_secret(created, SETTINGS)
    assert secret["metadata"]["namespace"] == "humanwork-system"
    assert secret["metadata"]["name"] == "humanwork-agent-signing-keys"
    loaded = read_signing_keys_secret(secret["data"])
    assert [(k.kid, t) for k, t in loaded] == [(old.kid, created[0][1]), (new.kid, NOW)]
    broken = dict(secret["data"])
    del broken[f"{old.kid}.pem"]
    with pytest.raises(ValueError, match="lacks"):
        read_signing_keys_secret(broken)
    swapped = dict(secret["data"])
    swapped[f"{old.kid}.pem"] = secret["data"][f"{new.kid}.pem"]
    with pytest.raises(ValueError, match="holds"):
        read_signing_keys_secret(swapped)


def test_jwks_config_map_verifies_tokens() -> None:
    key = generate_signing_key()
    minted = mint_agent_token(
        key, agent_id="org-acme/a", org_id=ORG, namespace="org-acme", ttl_seconds=600, now=NOW
    )
    config_map = jwks_config_map([key], SETTINGS)
    document = json.loads(config_map["data"]["jwks.json"])
    assert "d" not in document["keys"][0]
    assert verify_agent_token(minted.token, document, now=NOW).jti == minted.claims.jti


# --- Namespace checks --------------------------------------------------------------------


def test_org_mismatch() -> None:
    spec = instance().spec
    assert org_mismatch({"humanwork.io/org-id": ORG}, spec) is None
    missing = org_mismatch({}, spec)
    assert missing is not None and missing[0] == "NamespaceNotAnOrg"
    other = org_mismatch({"humanwork.io/org-id": "someone-else"}, spec)
    assert other is not None and other[0] == "OrgMismatch"


def test_missing_pod_security_labels() -> None:
    assert missing_pod_security_labels({})["pod-security.kubernetes.io/enforce"] == "restricted"
    assert missing_pod_security_labels(dict(builders.RESTRICTED_NAMESPACE_LABELS)) == {}
    partial = missing_pod_security_labels({"pod-security.kubernetes.io/enforce": "baseline"})
    assert "pod-security.kubernetes.io/enforce" not in partial
    assert partial["pod-security.kubernetes.io/audit"] == "restricted"


# --- Settings ----------------------------------------------------------------------------


def test_settings_from_environment() -> None:
    settings = OperatorSettings.from_env(
        {
            "HUMANWORK_OPERATOR_PLATFORM_NAMESPACE": "platform",
            "HUMANWORK_OPERATOR_AGENT_PORT": "9090",
            "HUMANWORK_OPERATOR_DNS_NAMESPACE": "",
            "UNRELATED": "x",
        }
    )
    assert settings.platform_namespace == "platform"
    assert settings.agent_port == 9090
    assert settings.dns_namespace is None
    assert settings.platform_api_url == "http://humanwork-platform-api.platform.svc:8000"
    assert OperatorSettings.from_env({}) == OperatorSettings()
    with pytest.raises(ValueError, match="AGENT_PORT"):
        OperatorSettings.from_env({"HUMANWORK_OPERATOR_AGENT_PORT": "many"})


def test_a_named_shards_deployment_carries_its_shard_label_and_its_pods_do_not() -> None:
    """So that each shard's watch of Deployments (agent_operator.child_watch) is given its
    own alone, and moving an org to another shard rolls no pod."""
    sharded = builders.deployment(instance(), OperatorSettings(shard="s1"))
    unsharded = builders.deployment(instance(), SETTINGS)
    assert sharded["metadata"]["labels"]["humanwork.io/shard"] == "s1"
    assert "humanwork.io/shard" not in unsharded["metadata"]["labels"]  # the default shard
    assert sharded["spec"]["template"] == unsharded["spec"]["template"]
    rest = {k: v for k, v in sharded["metadata"]["labels"].items() if k != "humanwork.io/shard"}
    assert rest == unsharded["metadata"]["labels"]
