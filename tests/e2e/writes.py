"""The one approved write the end-to-end tests of a step's outcome share: lower the
discrepant SKU at the warehouse by 3 (`FIX`), as a one-step task of the world's agent."""

from __future__ import annotations

import uuid

from humanwork_dev.fakes import catalog
from tests.e2e.conftest import World

MUG = catalog.BY_SKU[catalog.DISCREPANT_SKU].inventory_item_id
WAREHOUSE = catalog.WAREHOUSE_LOCATION_ID
FIX = {
    "action": "adjustInventoryLevel",
    "params": {"location_id": WAREHOUSE, "inventory_item_id": MUG, "available_adjustment": -3},
}


async def approved_write(world: World, *, decide: bool = True) -> str:
    """A one-step write task of the world's agent (approved by the expert unless
    `decide` is false); its name."""
    body = {
        "orgId": world.org_id,
        "agentRef": "agent",
        "conversationId": str(uuid.uuid4()),
        "description": "Lower HW-MUG-001 at the warehouse by 3",
        "steps": [
            {
                "id": "fix",
                "description": "Lower HW-MUG-001 at the warehouse by 3",
                "kind": "action",
                "tool": "shopify",
                "parameters": FIX,
                "risk": "high",
            }
        ],
    }
    r = await world.http.post(
        f"{world.platform.url}/agentic/tasks", json=body, headers=world.requester
    )
    assert r.status_code == 201, r.text
    name: str = r.json()["id"].split("/")[1]
    if decide:
        decided = await world.decide(name, "fix")
        assert decided.status_code == 200, decided.text
    return name
