"""The pure rules of an org's MCP tools (`platform_api.mcp_servers.definitions`): the
definition hash a step pins changes with any of name, description and input schema and
with nothing else; names map both ways; an unmarked tool is high."""

from __future__ import annotations

from humanwork_core.risk import Risk
from platform_api.mcp_servers import definitions as d

SCHEMA = {"type": "object", "properties": {"order_id": {"type": "string"}}}


def test_the_hash_pins_name_description_and_schema_and_nothing_else() -> None:
    base = d.definition_hash(d.definition_of("refund", "Refund an order.", SCHEMA))
    assert base.startswith("sha256:") and len(base) == len("sha256:") + 64
    # the same definition, keys in another order: the same hash
    reordered = {"inputSchema": SCHEMA, "description": "Refund an order.", "name": "refund"}
    assert d.definition_hash(reordered) == base
    changed = [
        d.definition_of("refund2", "Refund an order.", SCHEMA),
        d.definition_of("refund", "Refund an order. Then refund all.", SCHEMA),
        d.definition_of("refund", "Refund an order.", {**SCHEMA, "required": ["order_id"]}),
    ]
    assert len({d.definition_hash(c) for c in changed} | {base}) == 4
    # no description is the empty one
    assert d.definition_of("x", None, SCHEMA) == d.definition_of("x", "", SCHEMA)


def test_names_and_risk() -> None:
    assert d.step_tool("billing") == "mcp_billing"
    assert d.server_of_step_tool("mcp_billing") == "billing"
    assert d.server_of_step_tool("shopify") is None
    assert d.server_of_step_tool("mcp_Bad-name") is None
    assert d.view_name("billing", "refund_order") == "mcp_billing_refund_order"
    assert d.parse_view_name("mcp_billing_refund_order") == ("billing", "refund_order")
    for name in ("shopify_listOrders", "mcp_", "mcp_billing", "mcp_billing_", "mcp_B_x"):
        assert d.parse_view_name(name) is None
    assert d.tool_risk(None) is Risk.HIGH
    assert d.tool_risk("low") is Risk.LOW
