"""The control plane the whole suite stands on behaves like a real cluster.

Each test exercises one mechanism later issues rely on: version pinning, RBAC with
TokenRequest tokens, scheduling onto kwok nodes, ValidatingAdmissionPolicy, garbage
collection through owner references, and PodSecurity admission.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from humanwork_dev import cluster as local
from tests.conftest import PINNED_VERSION, Cluster
from tests.support import eventually, service_account_token


def test_version_is_the_pinned_release(cluster: Cluster) -> None:
    version = client.VersionApi(cluster.api).get_code()
    if cluster.local:
        assert version.git_version == PINNED_VERSION
        assert (version.major, version.minor) == ("1", PINNED_VERSION.split(".")[1])
        out = cluster.kubectl("version", "--client", "-o", "json").stdout
        assert f'"gitVersion": "{PINNED_VERSION}"' in out
    else:
        # ValidatingAdmissionPolicy v1 (GA in 1.30) is the oldest thing the suite needs
        assert version.major == "1" and int(version.minor.rstrip("+")) >= 30


def test_token_request_token_is_bound_by_rbac(
    cluster: Cluster, make_namespace: Callable[..., str]
) -> None:
    home, other = make_namespace("home"), make_namespace("other")
    core = client.CoreV1Api(cluster.api)
    core.create_namespaced_service_account(
        home, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name="probe"))
    )
    token = service_account_token(cluster.api, home, "probe")
    as_probe = client.CoreV1Api(cluster.client_for_token(token))

    with pytest.raises(client.ApiException) as refused:
        as_probe.list_namespaced_secret(other)
    assert refused.value.status == 403
    assert f"system:serviceaccount:{home}:probe" in refused.value.body

    rbac = client.RbacAuthorizationV1Api(cluster.api)
    rbac.create_namespaced_role(
        other,
        client.V1Role(
            metadata=client.V1ObjectMeta(name="read-secrets"),
            rules=[client.V1PolicyRule(api_groups=[""], resources=["secrets"], verbs=["list"])],
        ),
    )
    rbac.create_namespaced_role_binding(
        other,
        client.V1RoleBinding(
            metadata=client.V1ObjectMeta(name="probe-reads-secrets"),
            role_ref=client.V1RoleRef(
                api_group="rbac.authorization.k8s.io", kind="Role", name="read-secrets"
            ),
            subjects=[client.RbacV1Subject(kind="ServiceAccount", name="probe", namespace=home)],
        ),
    )
    listed = eventually(lambda: as_probe.list_namespaced_secret(other), timeout=20)
    assert listed.items == []
    # the grant is for `other` only: the home namespace's kube-system peer stays closed
    with pytest.raises(client.ApiException) as still_refused:
        as_probe.list_namespaced_secret("kube-system")
    assert still_refused.value.status == 403


def test_deployment_pod_runs_on_a_kwok_node(
    cluster: Cluster, make_namespace: Callable[..., str]
) -> None:
    ns = make_namespace("deploy")
    labels = {"app": "hello"}
    client.AppsV1Api(cluster.api).create_namespaced_deployment(
        ns,
        client.V1Deployment(
            metadata=client.V1ObjectMeta(name="hello"),
            spec=client.V1DeploymentSpec(
                replicas=1,
                selector=client.V1LabelSelector(match_labels=labels),
                template=client.V1PodTemplateSpec(
                    metadata=client.V1ObjectMeta(labels=labels),
                    spec=client.V1PodSpec(
                        containers=[
                            client.V1Container(name="hello", image="example.invalid/hello:1")
                        ]
                    ),
                ),
            ),
        ),
    )
    core = client.CoreV1Api(cluster.api)

    def running_pod() -> client.V1Pod | None:
        pods = core.list_namespaced_pod(ns, label_selector="app=hello").items
        return next((p for p in pods if p.status.phase == "Running"), None)

    pod = eventually(running_pod, timeout=90)
    node = core.read_node(pod.spec.node_name)
    assert node.metadata.annotations.get("kwok.x-k8s.io/node") == "fake"
    ready = eventually(
        lambda: (
            client.AppsV1Api(cluster.api)
            .read_namespaced_deployment("hello", ns)
            .status.ready_replicas
            == 1
        ),
        timeout=60,
    )
    assert ready


def test_validating_admission_policy_rejects_with_its_message(
    cluster: Cluster, make_namespace: Callable[..., str]
) -> None:
    ns = make_namespace("vap", labels={"vap-probe": "on"})
    name = f"no-forbidden-key-{ns}"
    admission = client.AdmissionregistrationV1Api(cluster.api)
    admission.create_validating_admission_policy(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "operations": ["CREATE", "UPDATE"],
                            "resources": ["configmaps"],
                        }
                    ]
                },
                "validations": [
                    {
                        "expression": "!has(object.data) || !('forbidden' in object.data)",
                        "message": "configmaps here may not carry the key 'forbidden'",
                    }
                ],
            },
        }
    )
    admission.create_validating_admission_policy_binding(
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": {"vap-probe": "on"}}},
            },
        }
    )
    core = client.CoreV1Api(cluster.api)
    try:

        def refused() -> str:
            try:
                early = core.create_namespaced_config_map(
                    ns,
                    client.V1ConfigMap(
                        metadata=client.V1ObjectMeta(generate_name="bad-"),
                        data={"forbidden": "yes"},
                    ),
                )
            except client.ApiException as exc:
                return str(json.loads(exc.body)["message"]) if exc.status in (400, 403, 422) else ""
            # the policy is not active yet (it propagates within seconds): undo and retry
            core.delete_namespaced_config_map(early.metadata.name, ns)
            return ""

        body = eventually(refused, timeout=30)
        assert "configmaps here may not carry the key 'forbidden'" in body
        created = core.create_namespaced_config_map(
            ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="good"), data={"ok": "1"})
        )
        assert created.metadata.name == "good"
        names = [c.metadata.name for c in core.list_namespaced_config_map(ns).items]
        assert not [n for n in names if n.startswith("bad-")]
    finally:
        admission.delete_validating_admission_policy_binding(name)
        admission.delete_validating_admission_policy(name)


def test_deleting_an_owner_garbage_collects_its_children(
    cluster: Cluster, make_namespace: Callable[..., str]
) -> None:
    ns = make_namespace("gc")
    core = client.CoreV1Api(cluster.api)
    owner = core.create_namespaced_config_map(
        ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="owner"))
    )
    core.create_namespaced_secret(
        ns,
        client.V1Secret(
            metadata=client.V1ObjectMeta(
                name="owned",
                owner_references=[
                    client.V1OwnerReference(
                        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
                    )
                ],
            ),
            string_data={"k": "v"},
        ),
    )
    core.delete_namespaced_config_map("owner", ns)

    def gone() -> bool:
        try:
            core.read_namespaced_secret("owned", ns)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    assert eventually(gone, timeout=60)


def test_restricted_namespace_rejects_a_privileged_pod(
    cluster: Cluster, make_namespace: Callable[..., str]
) -> None:
    ns = make_namespace("psa", labels={"pod-security.kubernetes.io/enforce": "restricted"})
    core = client.CoreV1Api(cluster.api)
    pod = client.V1Pod(
        metadata=client.V1ObjectMeta(name="privileged"),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="c",
                    image="example.invalid/c:1",
                    security_context=client.V1SecurityContext(privileged=True),
                )
            ]
        ),
    )
    with pytest.raises(client.ApiException) as refused:
        core.create_namespaced_pod(ns, pod)
    assert refused.value.status == 403
    message = json.loads(refused.value.body)["message"]
    assert 'violates PodSecurity "restricted:latest"' in message
    assert "privileged" in message
    assert core.list_namespaced_pod(ns).items == []


def _listening(pid: int) -> set[str]:
    """The local addresses of the TCP sockets process `pid` listens on (from /proc)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = fd.readlink().name
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, width in (("tcp", 8), ("tcp6", 32)):
        for line in Path(f"/proc/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] != "0A" or fields[9] not in inodes:  # 0A = LISTEN
                continue
            raw = bytes.fromhex(fields[1].split(":")[0][:width])
            if table == "tcp":
                found.add(socket.inet_ntop(socket.AF_INET, raw[::-1]))
            else:
                words = b"".join(raw[i : i + 4][::-1] for i in range(0, 16, 4))
                found.add(socket.inet_ntop(socket.AF_INET6, words))
    return found


def test_cluster_up_is_idempotent_and_binds_only_to_loopback(cluster: Cluster) -> None:
    if not cluster.local:
        assert cluster.info is None  # an existing cluster is used as it is, never started
        return
    assert cluster.info is not None
    state = Path(cluster.info.state_dir)
    again = local.up(state)
    assert (again.server, again.pids) == (cluster.info.server, cluster.info.pids)
    running = local.status(state)
    assert running is not None and running.kubeconfig == cluster.kubeconfig
    for name, pid in again.pids.items():
        addresses = _listening(pid)
        assert addresses, f"{name} listens on nothing?"
        assert addresses <= {"127.0.0.1", "::ffff:127.0.0.1"}, (name, addresses)
