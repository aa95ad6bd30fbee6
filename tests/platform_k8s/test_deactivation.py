"""Deactivating an org (issue 15, item 4, UC-20), from the attacker's side: once an org
admin deactivates the org, its agent's token is refused on the agent API and the tool
proxy (even while a finalizer still holds its AgentInstance), its users can change nothing
(plan requests, tasks, decisions one by one and in bulk, conversations, policy, tools,
knowledge, agents), its open tasks are cancelled with the reason and its agents deleted;
the audit log and the tasks stay readable; reactivating restores the agents from their
kept specs."""

from __future__ import annotations

from typing import Any

import httpx
from kubernetes import client as kclient

from tests.agents import GROUP, PLURAL, VERSION, agent_credentials, agent_token, instance_manifest
from tests.conftest import Cluster
from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs, TaskApi, until
from tests.platform_k8s.test_managed_agents import llm_secret, signed_event

HOLD = "tests.humanwork.io/hold"


def hold(cluster: Cluster, ns: str, finalizers: list[str]) -> None:
    kclient.CustomObjectsApi(cluster.api).patch_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL, "agent", {"metadata": {"finalizers": finalizers}}
    )


async def ready_agent(client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs) -> str:
    """The org's agent `agent`, created through the platform, Ready; its token."""
    llm_secret(cluster, orgs.ns_a)
    body = instance_manifest(orgs.ns_a, orgs.org_a, enabledTools=["shopify", "amazon"])["spec"]
    made = await client.post(
        f"/orgs/{orgs.org_a}/agents",
        json={"name": "agent", "spec": body},
        headers=orgs.admin_a.headers,
    )
    assert made.status_code == 201, made.text

    async def read() -> dict[str, Any]:
        r = await client.get(f"/orgs/{orgs.org_a}/agents/agent", headers=orgs.admin_a.headers)
        return dict(r.json())

    await until(read, lambda a: a["health"]["phase"] == "Ready", within=60)
    return agent_token(cluster, orgs.ns_a)


async def refused_work(
    client: httpx.AsyncClient, orgs: Orgs, task_id: str, conversation: str
) -> list[tuple[str, int, str]]:
    """Every kind of new work for org A: (what, status, code) of each answer."""
    a = orgs.org_a
    ns, name = task_id.split("/")
    calls = [
        ("plan", "POST", f"/orgs/{a}/agents/agent/tasks", {"request": "count"}, orgs.requester),
        ("task", "POST", "/agentic/tasks", None, orgs.requester),
        ("approve", "POST", f"/agentic/tasks/{task_id}/steps/read/approve", {}, orgs.expert),
        (
            "resume",
            "POST",
            f"/human-tasks/{ns}/{name}/read/resume",
            {"action": "approve"},
            orgs.expert,
        ),
        ("cancel", "POST", f"/agentic/tasks/{task_id}/cancel", None, orgs.requester),
        ("policy", "PUT", f"/orgs/{a}/policy", {}, orgs.admin_a),
        ("agent", "POST", f"/orgs/{a}/agents", {"name": "x", "spec": {}}, orgs.admin_a),
        ("agent-change", "PATCH", f"/orgs/{a}/agents/agent", {"spec": {}}, orgs.admin_a),
        ("conversation", "POST", f"/orgs/{a}/conversations", {"subject": "s"}, orgs.admin_a),
        (
            "message",
            "POST",
            f"/conversations/{conversation}/messages",
            {"role": "customer", "author": "c", "content": "hi"},
            orgs.admin_a,
        ),
        ("tool", "PUT", f"/orgs/{a}/tool-permissions/shopify", {"enabled": True}, orgs.admin_a),
        ("knowledge", "POST", f"/orgs/{a}/knowledge", {"title": "t", "content": "c"}, orgs.admin_a),
        ("revoke", "POST", f"/orgs/{a}/agents/agent/token/revoke", None, orgs.admin_a),
    ]
    out = []
    for what, method, url, body, caller in calls:
        if what == "task":
            body = {
                "orgId": a,
                "agentRef": "agent",
                "conversationId": conversation,
                "description": "d",
                "steps": [
                    {
                        "id": "read",
                        "description": "r",
                        "kind": "action",
                        "tool": "shopify",
                        "parameters": {},
                        "risk": "high",
                    }
                ],
            }
        r = await client.request(method, url, json=body, headers=caller.headers)
        code = r.json().get("code", "") if r.content else ""
        out.append((what, r.status_code, code))
    return out


async def test_a_deactivated_orgs_agent_users_and_decisions_are_all_refused(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs, tasks: TaskApi, api: Api
) -> None:
    token = await ready_agent(client, cluster, orgs)
    _, secret = agent_credentials(cluster, orgs.ns_a)
    bearer = {"Authorization": f"Bearer {token}"}
    assert (await client.get("/v1/agent-api/whoami", headers=bearer)).status_code == 200
    conversation = (
        await client.post(
            f"/orgs/{orgs.org_a}/conversations",
            json={"subject": "order 1042"},
            headers=orgs.admin_a.headers,
        )
    ).json()["id"]
    task = await tasks.create(orgs.requester, orgs.org_a, agentRef="agent")
    await tasks.until(orgs.expert, task["id"], lambda t: t["phase"] == "PendingApproval")
    # a finalizer (another controller's, a GitOps tool's) keeps the AgentInstance a while:
    # its token must be refused all the same
    hold(cluster, orgs.ns_a, [HOLD])

    url = f"/orgs/{orgs.org_a}/deactivate"
    assert (await client.post(url, headers=orgs.requester.headers)).status_code == 403
    assert (await client.post(url, headers=orgs.admin_b.headers)).status_code == 404
    done = await client.post(url, json={"reason": "contract ended"}, headers=orgs.admin_a.headers)
    assert done.status_code == 200, done.text
    assert done.json()["agents"] == [f"{orgs.ns_a}/agent"]
    assert done.json()["cancelledTasks"] == [task["id"]]
    # the cancellation carries the reason (read at once: a finished task is removed
    # after the tests' TTL of 3 s, which a loaded machine can reach before a later read)
    annotations = (
        kclient.CustomObjectsApi(cluster.api)
        .get_namespaced_custom_object(GROUP, VERSION, orgs.ns_a, "agentictasks", task["name"])
        .get("metadata", {})
        .get("annotations", {})
    )
    assert "contract ended" in annotations["humanwork.io/cancel-requested"]

    try:
        # the agent: refused on its API and on the tool proxy, though its instance remains
        who = await client.get("/v1/agent-api/whoami", headers=bearer)
        assert who.status_code == 401 and who.json()["details"]["reason"] == "token_revoked"
        event = await signed_event(
            client, secret, orgs.ns_a, orgs.org_a, "task.step_started", {}, expect=401
        )
        assert event["details"]["reason"] == "org_deactivated"
        tool = await client.post(
            "/v1/agent-api/tools/shopify",
            json={"action": "listProducts", "params": {}},
            headers=bearer,
        )
        assert tool.status_code == 401, tool.text

        # the users: every mutating path answers 409 org_deactivated
        answers = await refused_work(client, orgs, task["id"], conversation)
        assert [a for a in answers if a[1:] != (409, "org_deactivated")] == []
        # another org's expert learns nothing of the deactivation from a decision (the
        # decision endpoints check the org themselves, after membership: issue 17)
        ns, name = task["id"].split("/")
        for url, body in (
            (f"/agentic/tasks/{task['id']}/steps/read/approve", {}),
            (f"/human-tasks/{ns}/{name}/read/resume", {"action": "approve"}),
        ):
            stranger = await client.post(url, json=body, headers=orgs.expert_b.headers)
            assert stranger.status_code == 404, stranger.text
        bulk = await client.post(
            "/human-tasks/bulk-resume",
            json={"ids": [f"{task['id']}/read"], "action": "approve"},
            headers=orgs.expert.headers,
        )
        assert bulk.status_code == 200, bulk.text
        assert bulk.json()["results"][0]["code"] == "org_deactivated"
    finally:
        hold(cluster, orgs.ns_a, [])

    # the task is cancelled with the reason, the agent deleted; reads stay open
    ended = await tasks.until(orgs.expert, task["id"], lambda t: t["phase"] == "Cancelled")
    assert ended["phase"] == "Cancelled"
    listed = await client.get(f"/orgs/{orgs.org_a}/agents", headers=orgs.admin_a.headers)
    assert listed.status_code == 200 and listed.json() == []
    org = await client.get(f"/orgs/{orgs.org_a}", headers=orgs.viewer.headers)
    assert org.status_code == 200 and org.json()["deactivated_at"]
    audit = await client.get(
        "/audit", params={"action": "org.deactivated"}, headers=orgs.admin_a.headers
    )
    assert audit.status_code == 200 and audit.json()["items"][0]["details"]["reason"] == (
        "contract ended"
    )
    # org B is not affected
    other = await client.put(f"/orgs/{orgs.org_b}/policy", json={}, headers=orgs.admin_b.headers)
    assert other.status_code == 200, other.text

    # reactivated: work is accepted again and the agent comes back from its kept spec
    back = f"/orgs/{orgs.org_a}/reactivate"
    assert (await client.post(back, headers=orgs.requester.headers)).status_code == 403
    # the org's own admin cannot undo the platform's lever; a platform administrator can
    own = await client.post(back, headers=orgs.admin_a.headers)
    assert own.status_code == 403 and own.json()["code"] == "platform_admin_required", own.text
    assert (await client.get(f"/orgs/{orgs.org_a}", headers=orgs.admin_a.headers)).json()[
        "deactivated_at"
    ]
    root = await api.admin()
    again = await client.post(back, headers=root.headers)
    assert again.status_code == 200, again.text
    assert again.json()["agents"] == [f"{orgs.ns_a}/agent"]
    restored = await client.get(f"/orgs/{orgs.org_a}/agents/agent", headers=orgs.admin_a.headers)
    assert restored.status_code == 200 and restored.json()["spec"]["orgId"] == orgs.org_a
    assert (await client.post(back, headers=root.headers)).status_code == 409
    policy = await client.put(f"/orgs/{orgs.org_a}/policy", json={}, headers=orgs.admin_a.headers)
    assert policy.status_code == 200, policy.text
