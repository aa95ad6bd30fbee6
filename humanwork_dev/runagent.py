"""Run an AgentInstance's agent as a local process, with exactly what its pod gives it.

Simulated (kwok) nodes run no containers, so for development and the end-to-end tests
this plays the kubelet: it reads the agent Deployment's pod template, writes the mounted
Secrets, ConfigMap and projected ServiceAccount token into a private folder, resolves the
environment (`value`, `secretKeyRef`, `configMapKeyRef`, `fieldRef`) with mount paths
mapped to that folder, and starts `python -m agent_image` with that environment only
(plus PATH). The platform URL may be pointed at a local platform API.

    humanwork-run-agent NAMESPACE/NAME [--platform-url http://127.0.0.1:8000] [--port N]
"""

from __future__ import annotations

import argparse
import base64
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client, config

from humanwork_dev import cluster


@dataclass
class Materialised:
    """The pieces of a pod turned into a local process's argv, environment and files."""

    argv: list[str]
    env: dict[str, str]
    root: Path
    port: int
    metrics_port: int = 0
    """The local port of the agent's metrics (0: its pod spec serves none)."""


def _secret(core: client.CoreV1Api, ns: str, name: str) -> dict[str, bytes]:
    data = core.read_namespaced_secret(name, ns).data or {}
    return {k: base64.b64decode(v) for k, v in data.items()}


def _config_map(core: client.CoreV1Api, ns: str, name: str) -> dict[str, bytes]:
    return {
        k: v.encode() for k, v in (core.read_namespaced_config_map(name, ns).data or {}).items()
    }


def _write(folder: Path, files: dict[str, bytes], items: list[dict[str, Any]] | None) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    chosen = {i["key"]: i["path"] for i in items} if items else {k: k for k in files}
    for key, path in chosen.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(files[key])
        target.chmod(0o400)


def _volume_files(
    core: client.CoreV1Api, ns: str, pod: dict[str, Any], volume: dict[str, Any], folder: Path
) -> None:
    if "secret" in volume:
        src = volume["secret"]
        _write(folder, _secret(core, ns, src["secretName"]), src.get("items"))
    elif "configMap" in volume:
        src = volume["configMap"]
        _write(folder, _config_map(core, ns, src["name"]), src.get("items"))
    elif "projected" in volume:
        for source in volume["projected"]["sources"]:
            if "serviceAccountToken" in source:
                sat = source["serviceAccountToken"]
                request = client.AuthenticationV1TokenRequest(
                    spec=client.V1TokenRequestSpec(
                        audiences=[sat["audience"]] if sat.get("audience") else [],
                        expiration_seconds=sat.get("expirationSeconds", 3600),
                    )
                )
                issued = core.create_namespaced_service_account_token(
                    pod["serviceAccountName"], ns, request
                ).status
                token = str(issued.token if issued else "")
                _write(folder, {"token": token.encode()}, [{"key": "token", "path": sat["path"]}])
            elif "configMap" in source:
                src = source["configMap"]
                _write(folder, _config_map(core, ns, src["name"]), src.get("items"))
            elif "downwardAPI" in source:
                for item in source["downwardAPI"]["items"]:
                    if item["fieldRef"]["fieldPath"] == "metadata.namespace":
                        _write(folder, {"ns": ns.encode()}, [{"key": "ns", "path": item["path"]}])
    else:  # emptyDir and the like: an empty folder
        folder.mkdir(parents=True, exist_ok=True)


def _container_env(
    core: client.CoreV1Api,
    namespace: str,
    container: dict[str, Any],
    local_path: Callable[[str], str],
) -> dict[str, str]:
    """The container's environment as the kubelet would give it: values (paths under a
    mount moved to the local folder), Secret and ConfigMap keys, the namespace."""
    env: dict[str, str] = {}
    for var in container.get("env", []):
        if "value" in var:
            env[var["name"]] = local_path(var["value"])
            continue
        source = var.get("valueFrom", {})
        if "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            env[var["name"]] = _secret(core, namespace, ref["name"])[ref["key"]].decode()
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            env[var["name"]] = _config_map(core, namespace, ref["name"])[ref["key"]].decode()
        elif "fieldRef" in source and source["fieldRef"]["fieldPath"] == "metadata.namespace":
            env[var["name"]] = namespace
    return env


def materialise(
    api: client.ApiClient,
    namespace: str,
    name: str,
    root: Path,
    *,
    platform_url: str | None = None,
    port: int | None = None,
) -> Materialised:
    """Everything needed to run AgentInstance `namespace/name`'s agent locally."""
    core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
    deployment = apps.read_namespaced_deployment(f"{name}-agent", namespace)
    pod: dict[str, Any] = api.sanitize_for_serialization(  # type: ignore[no-untyped-call]
        deployment.spec.template.spec
    )
    container = pod["containers"][0]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts", []):
        local = root / mount["name"]
        _volume_files(core, namespace, pod, volumes[mount["name"]], local)
        mounts[mount["mountPath"]] = local

    def local_path(value: str) -> str:
        for mount_path, local in sorted(mounts.items(), key=lambda m: -len(m[0])):
            if value == mount_path or value.startswith(mount_path + "/"):
                return str(local) + value[len(mount_path) :]
        return value

    env = _container_env(core, namespace, container, local_path)
    # The kubelet tells every container where the API server is; so does this.
    server = urlsplit(api.configuration.host)
    env["KUBERNETES_SERVICE_HOST"] = server.hostname or "127.0.0.1"
    env["KUBERNETES_SERVICE_PORT"] = str(server.port or 443)
    chosen_port = port or cluster.free_port()
    env["HUMANWORK_AGENT_PORT"] = str(chosen_port)
    metrics_port = 0
    if env.get("HUMANWORK_AGENT_METRICS_PORT", "0") != "0":  # a local port, as for the API's
        metrics_port = cluster.free_port()
        env["HUMANWORK_AGENT_METRICS_PORT"] = str(metrics_port)
    env["HUMANWORK_HOST"] = "127.0.0.1"
    if "HOME" in env:
        env["HOME"] = str(mounts.get(env["HOME"], root))
    if platform_url:
        env["HUMANWORK_PLATFORM_URL"] = platform_url
        env["HUMANWORK_CALLBACK_URL"] = f"{platform_url}/v1/agent-events"
    env["PATH"] = os.environ.get("PATH", "/usr/bin:/bin")
    argv = [sys.executable, "-m", "agent_image", *container.get("args", [])]
    return Materialised(argv=argv, env=env, root=root, port=chosen_port, metrics_port=metrics_port)


def start(spec: Materialised, log: Path) -> subprocess.Popen[bytes]:
    """Start the agent with the pod's environment only."""
    return subprocess.Popen(
        spec.argv,
        env=spec.env,
        cwd=spec.root,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-run-agent", description=__doc__.split("\n")[0])
    parser.add_argument("agent", help="NAMESPACE/NAME of the AgentInstance")
    parser.add_argument("--platform-url", default=None, help="e.g. http://127.0.0.1:8000")
    parser.add_argument("--port", type=int, default=None)
    args = parser.parse_args(argv)
    namespace, _, name = args.agent.partition("/")
    if not name:
        parser.error("give the agent as NAMESPACE/NAME")
    running = cluster.status()
    kubeconfig = os.environ.get("KUBECONFIG") or (running.kubeconfig if running else None)
    if not kubeconfig:
        print("error: no cluster: run `make up` or set KUBECONFIG", file=sys.stderr)
        return 1
    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    with tempfile.TemporaryDirectory(prefix=f"agent-{namespace}-{name}-") as tmp:
        spec = materialise(
            api, namespace, name, Path(tmp), platform_url=args.platform_url, port=args.port
        )
        print(f"agent {args.agent} on http://127.0.0.1:{spec.port}", file=sys.stderr)
        return subprocess.call(spec.argv, env=spec.env, cwd=spec.root)


if __name__ == "__main__":
    raise SystemExit(main())
