"""The agent bounds on the platform's write path: an org admin's AgentInstance beyond what
the platform team allows (image, egress CIDR, toleration, node selector, runtime class,
resources) is a 422 `agent_bounds_exceeded` naming the field and the bound, and nothing is
written; the bounds are read from the admission parameters (the ConfigMap the admission
policy reads too), so widening them there widens what the platform accepts at once. On the
real control plane, the platform under its own ServiceAccount."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest
from kubernetes import client as kclient

from tests.agents import GROUP, PLURAL, VERSION, get_instance, widened_bounds
from tests.conftest import Cluster
from tests.platform.conftest import Api
from tests.platform_k8s.conftest import Orgs, until
from tests.platform_k8s.test_managed_agents import llm_secret, spec

BEYOND: list[tuple[dict[str, Any], str, str]] = [
    ({"image": "evil/miner:1"}, "spec.image", "agentImages"),
    (
        {"egress": {"extra": [{"cidr": "169.254.169.254/32", "ports": [80]}]}},
        "spec.egress.extra[0].cidr",
        "agentEgressDeniedCIDRs",
    ),
    (
        {"egress": {"llmCIDRs": ["10.96.0.0/12"]}},
        "spec.egress.llmCIDRs[0]",
        "agentEgressDeniedCIDRs",
    ),
    (
        {"tolerations": [{"operator": "Exists"}]},
        "spec.tolerations[0].key",
        "agentTolerationKeys",
    ),
    (
        {"nodeSelector": {"kubernetes.io/hostname": "control-plane"}},
        "spec.nodeSelector.kubernetes.io/hostname",
        "agentNodeSelectors",
    ),
    ({"runtimeClassName": "unconfined"}, "spec.runtimeClassName", "agentRuntimeClasses"),
    (
        {"resources": {"limits": {"cpu": "64", "memory": "512Mi"}}},
        "spec.resources.limits.cpu",
        "agentMaxCPU",
    ),
]


def _names(cluster: Cluster, ns: str) -> list[str]:
    found = kclient.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        GROUP, VERSION, ns, PLURAL
    )
    return sorted(i["metadata"]["name"] for i in found["items"])


def _beyond(r: httpx.Response, field: str, bound: str) -> None:
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["code"] == "agent_bounds_exceeded", body
    assert (body["details"]["field"], body["details"]["bound"]) == (field, bound), body
    assert field in body["message"]


@pytest.mark.parametrize(("change", "field", "bound"), BEYOND, ids=[b[1] for b in BEYOND])
async def test_an_org_admin_cannot_widen_the_sandbox(
    client: httpx.AsyncClient,
    cluster: Cluster,
    orgs: Orgs,
    change: dict[str, Any],
    field: str,
    bound: str,
) -> None:
    agents = f"/orgs/{orgs.org_a}/agents"
    llm_secret(cluster, orgs.ns_a)
    good = spec(orgs.ns_a, orgs.org_a)
    made = await client.post(
        agents, json={"name": "second", "spec": {**good, **change}}, headers=orgs.admin_a.headers
    )
    _beyond(made, field, bound)
    assert _names(cluster, orgs.ns_a) == []  # nothing created
    # positive control: the same agent within the bounds
    made = await client.post(
        agents, json={"name": "agent", "spec": good}, headers=orgs.admin_a.headers
    )
    assert made.status_code == 201, made.text
    before = get_instance(cluster, orgs.ns_a)
    changed = await client.patch(
        f"{agents}/agent", json={"spec": change}, headers=orgs.admin_a.headers
    )
    _beyond(changed, field, bound)
    after = get_instance(cluster, orgs.ns_a)
    assert after["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]


async def test_the_platform_reads_the_bounds_the_platform_team_sets(
    client: httpx.AsyncClient, cluster: Cluster, orgs: Orgs
) -> None:
    agents = f"/orgs/{orgs.org_a}/agents"
    llm_secret(cluster, orgs.ns_a)
    toleration = {"tolerations": [{"key": "humanwork.dev/sandbox", "operator": "Exists"}]}
    body = {"name": "agent", "spec": {**spec(orgs.ns_a, orgs.org_a), **toleration}}
    _beyond(
        await client.post(agents, json=body, headers=orgs.admin_a.headers),
        "spec.tolerations[0].key",
        "agentTolerationKeys",
    )
    with widened_bounds(cluster, agentTolerationKeys="humanwork.dev/sandbox"):
        await until(
            lambda: client.post(agents, json=body, headers=orgs.admin_a.headers),
            lambda r: r.status_code == 201,
        )
    assert get_instance(cluster, orgs.ns_a)["spec"]["tolerations"][0]["key"] == (
        "humanwork.dev/sandbox"
    )


async def test_an_org_with_a_first_agent_beyond_the_bounds_is_not_created(
    client: httpx.AsyncClient, cluster: Cluster, api: Api, org_namespaces: list[str]
) -> None:
    root = await api.admin()
    slug = f"bound-{uuid.uuid4().hex[:6]}"
    org_namespaces.append(f"org-{slug}")
    template = {**spec(f"org-{slug}", str(uuid.uuid4())), "image": "evil/miner:1"}
    refused = await client.post(
        "/orgs",
        json={"slug": slug, "name": "Bound", "agent": {"name": "shop", "spec": template}},
        headers=root.headers,
    )
    _beyond(refused, "spec.image", "agentImages")
    mine = (await client.get("/orgs", headers=root.headers)).json()
    assert slug not in [o["slug"] for o in mine]
    namespaces = kclient.CoreV1Api(cluster.api).list_namespace().items
    assert f"org-{slug}" not in [n.metadata.name for n in namespaces]
