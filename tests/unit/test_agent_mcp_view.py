"""What `tools/list` shows an agent (`platform_api.agent_mcp.view`), as pure data: the
catalog cut to the org's enabled tools, their `allowedActions` and the agent's
`enabledTools`; nothing without the `tools:execute` scope; every risk the catalog's."""

from __future__ import annotations

from humanwork_core import catalog
from platform_api.agent_api.identity import Agent
from platform_api.agent_mcp import view
from platform_api.tools import config as tool_config

SCOPES = frozenset({"tools:execute", "context:read"})


def agent(tools: set[str], scopes: frozenset[str] = SCOPES) -> Agent:
    return Agent("org-a/agent", "org-a", "agent", "org-id", scopes, "jti", frozenset(tools))


def names(actions: list[catalog.Action]) -> set[str]:
    return {view.mcp_name(a) for a in actions}


def test_only_what_the_org_and_the_agent_both_enable() -> None:
    shopify = tool_config.parse("shopify", {})
    amazon = tool_config.parse("amazon", {"allowedActions": ["getOrder"]})
    both = {"shopify": shopify, "amazon": amazon}
    seen = names(view.visible(agent({"shopify", "amazon", "web"}), both))
    shop = {view.mcp_name(a) for a in catalog.TOOLS["shopify"].actions.values()}
    assert seen == shop | {"amazon_getOrder"}  # web: the org did not enable it
    assert names(view.visible(agent({"amazon"}), both)) == {"amazon_getOrder"}
    # an alias in enabledTools enables nothing, as at the proxy
    assert names(view.visible(agent({"shopify_query"}), both)) == set()
    assert view.visible(agent({"shopify"}, frozenset({"context:read"})), both) == []


def test_each_tool_carries_the_catalogs_risk_and_schema() -> None:
    for tool in catalog.TOOLS.values():
        for action in tool.actions.values():
            described = view.describe(action)
            assert view.resolve(described.name) is action
            assert described.meta is not None
            assert described.meta["humanwork.io/risk"] == action.min_risk.value
            assert described.meta["humanwork.io/sideEffect"] is action.side_effect
            assert described.inputSchema == action.json_schema()
            dumped = described.model_dump(by_alias=True)
            assert dumped["_meta"]["humanwork.io/approvalRequired"] is action.side_effect
    assert view.resolve("shopify_dropTables") is None
