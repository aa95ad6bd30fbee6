"""The production overlay's half of issue 12 item 9: migrations connect as the schema's
owner (its own Secret), the serving containers as the app role, and a hardened CronJob signs
the audit checkpoints onto a volume with a key from a Secret that only it mounts; the API
server admits that Job's pod under the namespace's `restricted` Pod Security Standard."""

from __future__ import annotations

import uuid
from typing import Any

from kubernetes import client

from humanwork_dev.deployables import all_settings
from tests.conftest import Cluster
from tests.integration.conftest import REPO
from tests.integration.test_manifests import PLATFORM, build, container, one, secret_files

CRONJOB = "humanwork-audit-checkpoint"


def _secret_env(pod: dict[str, Any], c: dict[str, Any]) -> dict[str, tuple[str, str]]:
    """The Secrets `c` reads as files, {variable: (Secret, key)}."""
    return {name: (secret, key) for name, (secret, key, _) in secret_files(pod, c).items()}


def test_migrations_run_as_the_owner_and_the_app_as_the_app_role(cluster: Cluster) -> None:
    docs = build(cluster, "manifests/overlays/production")
    platform = one(docs, "Deployment", PLATFORM)
    pod = platform["spec"]["template"]["spec"]
    (migrate,) = pod["initContainers"]
    assert _secret_env(pod, migrate) == {
        "HUMANWORK_DATABASE_URL": ("humanwork-platform-database", "url"),
        "HUMANWORK_DATABASE_OWNER_URL": ("humanwork-platform-database-owner", "url"),
    }
    serving = _secret_env(pod, container(platform, "platform-api"))
    assert serving["HUMANWORK_DATABASE_URL"] == ("humanwork-platform-database", "url")
    assert "HUMANWORK_DATABASE_OWNER_URL" not in serving
    # the checkpoint key is in no serving pod
    volumes = platform["spec"]["template"]["spec"]["volumes"]
    assert "humanwork-audit-checkpoint-key" not in str(volumes)
    operations = (REPO / "docs/operations.md").read_text()
    for name in ("humanwork-platform-database-owner", "humanwork-audit-checkpoint-key"):
        assert name in operations


def test_the_checkpoint_cronjob_is_hardened_and_reads_its_key_and_volume(
    cluster: Cluster,
) -> None:
    docs = build(cluster, "manifests/overlays/production")
    cron = one(docs, "CronJob", CRONJOB)
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert pod["securityContext"]["runAsNonRoot"] is True
    (c,) = pod["containers"]
    assert c["args"] == ["audit-checkpoint"]
    assert _secret_env(pod, c) == {"HUMANWORK_DATABASE_URL": ("humanwork-platform-database", "url")}
    assert c["image"] == container(one(docs, "Deployment", PLATFORM), "platform-api")["image"]
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert c["securityContext"]["capabilities"]["drop"] == ["ALL"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    platform_settings = {v for s in all_settings()["platform"] for v in s.variables}
    assert set(env) <= platform_settings
    volumes = {v["name"]: v for v in pod["volumes"]}
    mounts = {m["mountPath"]: m["name"] for m in c["volumeMounts"]}
    directory = env["HUMANWORK_AUDIT_CHECKPOINT_DIR"]
    key_dir = env["HUMANWORK_AUDIT_CHECKPOINT_KEY_FILE"].rsplit("/", 1)[0]
    claim = volumes[mounts[directory]]["persistentVolumeClaim"]["claimName"]
    assert one(docs, "PersistentVolumeClaim", claim)
    assert volumes[mounts[key_dir]]["secret"]["secretName"] == "humanwork-audit-checkpoint-key"
    assert "emptyDir" in volumes[mounts["/tmp"]]


def test_the_checkpoint_pod_passes_the_restricted_standard(
    cluster: Cluster, installed: None
) -> None:
    """A server-side dry run of the Job's pod in humanwork-system (which enforces
    `restricted`): refused if it did not pass."""
    cron = one(build(cluster, "manifests/overlays/production"), "CronJob", CRONJOB)
    template = cron["spec"]["jobTemplate"]["spec"]["template"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"audit-{uuid.uuid4().hex[:8]}", "namespace": "humanwork-system"},
        "spec": template["spec"],
    }
    core = client.CoreV1Api(cluster.api)
    created: Any = core.create_namespaced_pod("humanwork-system", pod, dry_run="All")
    assert created.spec.containers[0].name == "audit-checkpoint"
