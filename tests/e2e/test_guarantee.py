"""Issue 12's attack, verbatim, against the running system: the demo agent's own
ServiceAccount token, `kubectl create` of an AgenticTask naming that agent with
`spec.policy.autoApprove: [low, medium]` and one step `tool: shopify`, `parameters:
{action: adjustInventoryLevel, params: {... available_adjustment: -30}}`, `risk: low`.
Before the fix the platform auto-approved it within a second, the agent executed it and
the fake Shopify's stock went from 40 to 10 with no person seeing the step.

Each layer is then attacked on its own (the CRD's catalog rule, the org's policy, the
proxy), and a positive control shows the same write does go through once an expert
approves it, so the stock staying at 40 means something."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import yaml

from humanwork_dev.cluster import token_kubeconfig
from humanwork_dev.fakes import catalog
from tests.e2e.barriers import agent_caught_up
from tests.e2e.conftest import World, execution_state, step_of

MUG = catalog.BY_SKU["HW-MUG-001"].inventory_item_id
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
WRITE_PARAMS = {
    "action": "adjustInventoryLevel",
    "params": {
        "inventory_item_id": MUG,
        "location_id": WAREHOUSE,
        "available_adjustment": -30,
    },
}


def attack(world: World, *, auto_approve: list[str], risk: str) -> dict[str, Any]:
    """The issue's AgenticTask (with the given policy and declared risk)."""
    return {
        "apiVersion": "humanwork.io/v1alpha1",
        "kind": "AgenticTask",
        "metadata": {"name": f"attack-{uuid.uuid4().hex[:6]}", "namespace": world.namespace},
        "spec": {
            "orgId": world.org_id,
            "agentRef": {"name": "agent"},
            "description": "Fix the mug stock",
            "requestedBy": "agent:agent",
            "policy": {"autoApprove": auto_approve},
            "steps": [
                {
                    "id": "1",
                    "description": "Correct the mug stock",
                    "tool": "shopify",
                    "parameters": WRITE_PARAMS,
                    "risk": risk,
                }
            ],
        },
    }


def as_agent(world: World, tmp: Path) -> Path:
    """A kubeconfig holding the agent's own ServiceAccount token (what its pod mounts)."""
    path = tmp / "agent-sa.kubeconfig"
    token_kubeconfig(
        world.cluster.kubeconfig, world.cluster.kubectl_path, world.namespace, "agent-agent", path
    )
    return path


def kubectl_create(world: World, kubeconfig: Path, manifest: dict[str, Any]) -> Any:
    return subprocess.run(
        [world.cluster.kubectl_path, "--kubeconfig", str(kubeconfig), "create", "-f", "-"],
        input=yaml.safe_dump(manifest),
        capture_output=True,
        text=True,
        check=False,
    )


async def test_the_issue_attack_verbatim_changes_nothing(world: World, tmp_path: Path) -> None:
    assert world.shop.inventory(MUG) == 40
    kubeconfig = as_agent(world, tmp_path)
    # an org that opted in to auto-approving low risk is the attacker's best case
    r = await world.http.put(
        f"{world.platform.url}/orgs/{world.org_id}/policy",
        json={"autoApproveLow": True},
        headers=world.admin,
    )
    assert r.status_code == 200, r.text

    done = kubectl_create(
        world, kubeconfig, attack(world, auto_approve=["low", "medium"], risk="low")
    )
    assert done.returncode != 0, done.stdout
    assert "only low risk steps may be auto-approved" in done.stderr, done.stderr
    assert "risk is at least high" in done.stderr, done.stderr

    # one layer at a time: only low auto-approves, but a write declared low is refused
    done = kubectl_create(world, kubeconfig, attack(world, auto_approve=["low"], risk="low"))
    assert done.returncode != 0 and "risk is at least high" in done.stderr, done.stderr

    # declared honestly (high) and asking for auto-approval: admitted, never auto-approved
    manifest = attack(world, auto_approve=["low"], risk="high")
    done = kubectl_create(world, kubeconfig, manifest)
    assert done.returncode == 0, done.stderr
    name = manifest["metadata"]["name"]
    task = await world.until(name, lambda t: bool((t.get("status") or {}).get("nextDeadline")))
    await agent_caught_up(world)  # the agent's watch and its executor saw it, and acted
    task = await world.task(name)
    assert not step_of(task, "1").get("decision"), task
    assert execution_state(task, "1") is None
    assert world.shop.inventory(MUG) == 40
    assert not world.shop.requests_to("inventory_levels/adjust.json")

    # the agent's own token at the proxy, naming the unapproved step: refused
    r = await world.http.post(
        f"{world.platform.url}/v1/agent-api/tools/shopify",
        json={**WRITE_PARAMS, "idempotencyKey": "attack", "task": name, "step": "1"},
        headers={"Authorization": f"Bearer {world.token}"},
    )
    assert r.status_code == 403 and r.json()["code"] == "step_not_approved", r.text
    assert world.shop.inventory(MUG) == 40

    # positive control: the same write runs once an expert approves it
    r = await world.decide(name, "1")
    assert r.status_code == 200, r.text
    await world.until(name, lambda t: execution_state(t, "1") == "Succeeded")
    assert world.shop.inventory(MUG) == 10
    assert len(world.shop.requests_to("inventory_levels/adjust.json")) == 1
