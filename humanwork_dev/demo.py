"""The demo org of `make up`, made through the platform API as an admin would: org `demo`
(namespace org-demo), an expert `expert` and a client `client` (their passwords in
`.cluster/expert-password` and `.cluster/client-password`), Shopify and Amazon enabled and
pointed at the stack's fake upstreams, and the AgentInstance `agent` (the offline planner
unless HUMANWORK_DEMO_LLM_URL and HUMANWORK_DEMO_LLM_KEY name a model). Idempotent: a
second `make up` finds what the first made. `humanwork_dev.stack` calls it."""

from __future__ import annotations

import base64
import json
import os
import secrets
import ssl
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx

from humanwork_dev import cluster, incluster

DEMO_SLUG = "demo"
DEMO_NAMESPACE = f"org-{DEMO_SLUG}"
DEMO_EXPERT = "expert"
DEMO_CLIENT = "client"
"""The demo org's client (role `client`): signs in to the portal at `/portal`."""


def _password(path: Path) -> str:
    """The password kept in `path` (mode 0600), made the first time."""
    if not path.exists():
        path.write_text(secrets.token_urlsafe(12))
        path.chmod(0o600)
    return path.read_text().strip()


def _user(http: httpx.Client, admin: dict[str, str], body: dict[str, Any]) -> None:
    made = http.post("/users", json=body, headers=admin)
    if made.status_code != 409:  # made by an earlier `make up`
        made.raise_for_status()


def _org_id(http: httpx.Client, admin: dict[str, str]) -> str:
    created = http.post("/orgs", json={"slug": DEMO_SLUG, "name": "Acme (demo)"}, headers=admin)
    if created.status_code != 409:
        created.raise_for_status()
        return str(created.json()["id"])
    orgs = http.get("/orgs", headers=admin).json()
    items = orgs["items"] if isinstance(orgs, dict) else orgs
    return str(next(o["id"] for o in items if o["slug"] == DEMO_SLUG))


def _tools(http: httpx.Client, admin: dict[str, str], org_id: str, state: Path) -> None:
    """Shopify and Amazon enabled, with the fake upstreams' credentials."""
    fakes = json.loads((state / "fake-credentials.json").read_text())
    for tool in ("shopify", "amazon"):
        http.put(
            f"/orgs/{org_id}/tool-permissions/{tool}", json={"enabled": True}, headers=admin
        ).raise_for_status()
        http.put(
            f"/orgs/{org_id}/integrations/{tool}",
            json={"credentials": fakes[tool]},
            headers=admin,
        ).raise_for_status()


def _agent_manifest(org_id: str, on_real_node: bool) -> dict[str, Any]:
    """The LLM key's Secret and the AgentInstance `agent`."""
    llm = {
        # no model: the agent's offline planner (set a real endpoint and
        # HUMANWORK_DEMO_LLM_KEY to use one)
        "baseURL": os.environ.get("HUMANWORK_DEMO_LLM_URL", "https://llm.example/v1"),
        "apiKeySecretRef": {"name": "llm", "key": "api-key"},
    }
    spec = {
        "orgId": org_id,
        "specialist": {
            "name": "Ops",
            "systemPrompt": "You reconcile Amazon orders with Shopify stock.",
        },
        "model": "offline",
        "enabledTools": ["amazon", "shopify"],
        **(incluster.agent_scheduling() if on_real_node else {}),
        "llm": llm,
    }
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "llm", "namespace": DEMO_NAMESPACE},
        "stringData": {"api-key": os.environ.get("HUMANWORK_DEMO_LLM_KEY", "none")},
    }
    instance = {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgentInstance",
        "metadata": {"name": "agent", "namespace": DEMO_NAMESPACE},
        "spec": spec,
    }
    return {"apiVersion": "v1", "kind": "List", "items": [secret, instance]}


def _agent(info: cluster.ClusterInfo, org_id: str, on_real_node: bool) -> None:
    """The demo agent applied, and Ready."""
    env = {**os.environ, "KUBECONFIG": info.kubeconfig}
    subprocess.run(
        [info.kubectl, "apply", "--server-side", "--field-manager=humanwork-demo", "-f", "-"],
        input=json.dumps(_agent_manifest(org_id, on_real_node)).encode(),
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )
    ready = "--for=jsonpath={.status.phase}=Ready"
    subprocess.run(
        [
            info.kubectl,
            "wait",
            "-n",
            DEMO_NAMESPACE,
            ready,
            "agentinstance/agent",
            "--timeout=180s",
        ],
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
    )


def make_org(
    platform: tuple[str, ssl.SSLContext | bool],
    state: Path,
    info: cluster.ClusterInfo,
    admin_password: str,
    on_real_node: bool = False,
) -> str:
    """The demo org through the platform at `platform` (its URL and TLS verification),
    with its users, tools and agent; idempotent. The expert's password."""
    base, verify = platform
    with httpx.Client(base_url=base, timeout=30, verify=verify) as http:
        token = http.post("/auth/token", json={"username": "admin", "password": admin_password})
        token.raise_for_status()
        admin = {"Authorization": f"Bearer {token.json()['access_token']}"}
        org_id = _org_id(http, admin)
        password = _password(state / "expert-password")
        expert = {"username": DEMO_EXPERT, "password": password, "role": "operator"}
        _user(http, admin, {**expert, "org_ids": [org_id]})
        client_password = _password(state / "client-password")
        client = {"username": DEMO_CLIENT, "password": client_password, "role": "client"}
        _user(http, admin, {**client, "org_ids": [org_id]})
        _tools(http, admin, org_id, state)
    _agent(info, org_id, on_real_node)
    return password


def configure_agent(info: cluster.ClusterInfo, port: int) -> None:
    """Let the demo agent (a local process on `port`) look up the stores (read-only,
    through the tool proxy) while it plans, so the seed's example comes with the exact
    inventory correction to approve. Sent like the platform sends commands: signed with
    the instance's callback secret."""
    from kubernetes import client, config

    from humanwork_core import signing

    api = config.new_client_from_config(config_file=info.kubeconfig)  # type: ignore[no-untyped-call]
    secret = client.CoreV1Api(api).read_namespaced_secret("agent-agent-callback", DEMO_NAMESPACE)
    key = base64.b64decode((secret.data or {})["secret"]).decode()
    body = json.dumps({"planningLookups": True}).encode()
    httpx.post(
        f"http://127.0.0.1:{port}/v1/configure",
        content=body,
        headers={
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(key, body, int(time.time())),
        },
        timeout=30,
    ).raise_for_status()
