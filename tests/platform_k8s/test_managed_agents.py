"""An org's agents managed through the platform (issue 15, items 1 and 2): created, read,
changed and deleted through `/orgs/{org_id}/agents` on the real control plane, validated
by the CRD's own model first and the API server second, audited, each with its health
(phase, replicas, conditions, token expiry, configuration, heartbeat, open tasks); and an
org created with its first agent."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
from kubernetes import client as kclient

from humanwork_core import signing
from tests.agents import LLM_KEY, agent_credentials, get_instance, instance_manifest
from tests.conftest import Cluster
from tests.platform.conftest import Api, Caller
from tests.platform_k8s.conftest import Orgs, TaskApi, until


def spec(ns: str, org_id: str, **changes: Any) -> dict[str, Any]:
    """A good AgentInstance spec, without orgId (the platform sets it)."""
    body = instance_manifest(ns, org_id, **changes)["spec"]
    return {k: v for k, v in body.items() if k != "orgId"}


def llm_secret(cluster: Cluster, ns: str) -> None:
    kclient.CoreV1Api(cluster.api).create_namespaced_secret(
        ns,
        kclient.V1Secret(
            metadata=kclient.V1ObjectMeta(name="llm"), string_data={"api-key": LLM_KEY}
        ),
    )


async def audited(client: httpx.AsyncClient, caller: Caller, action: str) -> list[dict[str, Any]]:
    r = await client.get("/audit", params={"action": action}, headers=caller.headers)
    assert r.status_code == 200, r.text
    items: list[dict[str, Any]] = r.json()["items"]
    return items


async def signed_event(
    client: httpx.AsyncClient,
    secret: str,
    ns: str,
    org_id: str,
    kind: str,
    payload: dict[str, Any],
    expect: int | None = None,
) -> dict[str, Any]:
    """Send a signed agent event of agent `agent`; its answer (2xx unless `expect`)."""
    raw = json.dumps(
        {
            "event_type": kind,
            "agent_id": f"{ns}/agent",
            "org_id": org_id,
            "timestamp": datetime.now(UTC).isoformat(),
            "payload": payload,
            "idempotency_key": str(uuid.uuid4()),
        }
    ).encode()
    r = await client.post(
        "/v1/agent-events",
        content=raw,
        headers={
            "Content-Type": "application/json",
            signing.SIGNATURE_HEADER: signing.sign(secret, raw, datetime.now(UTC)),
        },
    )
    if expect is None:
        assert r.status_code in (200, 201, 202), r.text
    else:
        assert r.status_code == expect, r.text
    answer: dict[str, Any] = r.json()
    return answer


async def test_an_org_admin_manages_an_agent_and_sees_its_health(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, tasks: TaskApi
) -> None:
    agents = f"/orgs/{orgs.org_a}/agents"
    good = spec(orgs.ns_a, orgs.org_a)
    llm_secret(cluster, orgs.ns_a)

    # agents.manage only, in the caller's own org
    body = {"name": "agent", "spec": good}
    assert (await client.post(agents, json=body, headers=orgs.requester.headers)).status_code == 403
    assert (await client.post(agents, json=body, headers=orgs.admin_b.headers)).status_code == 404
    assert (await client.get(agents, headers=orgs.admin_b.headers)).status_code == 404

    # the CRD's own model refuses a bad spec before Kubernetes sees it; nothing is created
    bad = await client.post(
        agents,
        json={"name": "agent", "spec": {**good, "temperature": 5}},
        headers=orgs.admin_a.headers,
    )
    assert bad.status_code == 422 and bad.json()["code"] == "agent_spec_invalid", bad.text
    assert bad.json()["details"]["errors"][0]["loc"] == ["spec", "temperature"]
    assert (await client.get(agents, headers=orgs.admin_a.headers)).json() == []

    # spec.orgId is the org's, whatever the caller says
    made = await client.post(
        agents,
        json={"name": "agent", "spec": {**good, "orgId": orgs.org_b}},
        headers=orgs.admin_a.headers,
    )
    assert made.status_code == 201, made.text
    assert get_instance(cluster, orgs.ns_a)["spec"]["orgId"] == orgs.org_a
    again = await client.post(agents, json=body, headers=orgs.admin_a.headers)
    assert again.status_code == 409

    # its health, once the operator made it Ready
    async def read() -> dict[str, Any]:
        r = await client.get(f"{agents}/agent", headers=orgs.admin_a.headers)
        assert r.status_code == 200, r.text
        found: dict[str, Any] = r.json()
        return found

    ready = await until(read, lambda a: a["health"]["phase"] == "Ready", within=60)
    health = ready["health"]
    assert health["readyReplicas"] == 1 and health["desiredReplicas"] == 1
    assert {c["type"] for c in health["conditions"]} >= {"Ready", "TokenValid"}
    assert health["tokenExpiresAt"] and health["config"]["desired"]
    assert health["lastHeartbeat"] is None and health["openTasks"] == 0

    # the agent reports the configuration it loaded (a signed event: its heartbeat) and
    # has a task open
    _, secret = agent_credentials(cluster, orgs.ns_a)
    desired = health["config"]["desired"]
    await signed_event(
        client, secret, orgs.ns_a, orgs.org_a, "config.applied", {"configHash": desired}
    )
    await tasks.create(orgs.requester, orgs.org_a, agentRef="agent")
    seen = await until(read, lambda a: a["health"]["config"]["inSync"], within=30)
    assert seen["health"]["lastHeartbeat"] is not None
    assert seen["health"]["openTasks"] == 1
    listed = (await client.get(agents, headers=orgs.admin_a.headers)).json()
    assert [a["name"] for a in listed] == ["agent"] and listed[0]["health"]["openTasks"] == 1

    # a change is a merge of the spec, validated, under the resourceVersion precondition
    stale = seen["resourceVersion"]
    changed = await client.patch(
        f"{agents}/agent",
        json={"spec": {"temperature": 0.2, "replicas": 2}},
        headers=orgs.admin_a.headers,
    )
    assert changed.status_code == 200, changed.text
    assert changed.json()["spec"]["temperature"] == 0.2
    # the model's defaults (issue 15 item 5: `keywords`) are filled in
    assert changed.json()["spec"]["specialist"] == {"keywords": [], **good["specialist"]}
    conflict = await client.patch(
        f"{agents}/agent",
        json={"spec": {"replicas": 3}, "resourceVersion": stale},
        headers=orgs.admin_a.headers,
    )
    assert conflict.status_code == 409, conflict.text
    refused = await client.patch(
        f"{agents}/agent", json={"spec": {"replicas": 99}}, headers=orgs.admin_a.headers
    )
    assert refused.status_code == 422 and refused.json()["code"] == "agent_spec_invalid"
    assert get_instance(cluster, orgs.ns_a)["spec"]["replicas"] == 2

    # deleted: its tokens and children go; everything audited
    gone = await client.delete(f"{agents}/agent", headers=orgs.admin_a.headers)
    assert gone.status_code == 204, gone.text
    assert (await client.get(f"{agents}/agent", headers=orgs.admin_a.headers)).status_code == 404
    created = await audited(client, orgs.admin_a, "agent.created")
    assert any(e["target"] == f"agent:{orgs.ns_a}/agent" for e in created)
    updated = await audited(client, orgs.admin_a, "agent.updated")
    assert updated[0]["details"]["before"] == {"replicas": 1, "temperature": 0.3}
    assert updated[0]["details"]["after"] == {"replicas": 2, "temperature": 0.2}
    assert await audited(client, orgs.admin_a, "agent.deleted")


async def test_the_api_servers_refusal_is_a_clear_422(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs
) -> None:
    """A namespace that lost its org label (a GitOps mistake): admission refuses the agent,
    and the platform says so with the same stable code."""
    kclient.CoreV1Api(cluster.api).patch_namespace(
        orgs.ns_b, {"metadata": {"labels": {"humanwork.io/org-id": None}}}
    )
    made = await client.post(
        f"/orgs/{orgs.org_b}/agents",
        json={"name": "agent", "spec": spec(orgs.ns_b, orgs.org_b)},
        headers=orgs.admin_b.headers,
    )
    assert made.status_code == 422, made.text
    assert made.json()["code"] == "agent_spec_invalid"
    assert "org-id" in made.json()["details"]["apiServer"]


async def test_an_org_is_created_with_its_first_agent(
    client: httpx.AsyncClient, cluster: Cluster, api: Api, org_namespaces: list[str]
) -> None:
    root = await api.admin()
    slug = f"first-{uuid.uuid4().hex[:6]}"
    org_namespaces.append(f"org-{slug}")
    template = spec(f"org-{slug}", str(uuid.uuid4()))

    # a bad template creates nothing: not the org, not its namespace's agent
    bad = {**template, "enabledTools": ["Not A Tool"]}
    refused = await client.post(
        "/orgs",
        json={"slug": slug, "name": "First", "agent": {"name": "shop", "spec": bad}},
        headers=root.headers,
    )
    assert refused.status_code == 422 and refused.json()["code"] == "agent_spec_invalid"
    mine = (await client.get("/orgs", headers=root.headers)).json()
    assert slug not in [o["slug"] for o in mine]

    made = await client.post(
        "/orgs",
        json={"slug": slug, "name": "First", "agent": {"name": "shop", "spec": template}},
        headers=root.headers,
    )
    assert made.status_code == 201, made.text
    org = made.json()
    assert org["agent"] == f"org-{slug}/shop"
    instance = get_instance(cluster, f"org-{slug}", "shop")
    assert instance["spec"]["orgId"] == org["id"]
    assert instance["spec"]["specialist"] == {"keywords": [], **template["specialist"]}
    listed = await client.get(f"/orgs/{org['id']}/agents", headers=root.headers)
    assert [a["name"] for a in listed.json()] == ["shop"]
