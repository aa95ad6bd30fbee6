"""`/orgs/{org_id}/mcp-servers`: an org's admin registers its remote MCP servers, refreshes
their tools, sets each tool's risk and deletes them (all `tools.manage`); no endpoint
returns a server's auth."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response, status

from platform_api.auth.dependencies import require_in_org
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.floor.principal import OrgScope
from platform_api.integrations.crypto import Cipher
from platform_api.mcp_servers import service
from platform_api.mcp_servers.definitions import SERVER_NAME_PATTERN
from platform_api.mcp_servers.schemas import TOOL_NAME_PATTERN, McpServerIn, McpServerRead, RiskPut
from platform_api.tools.upstreams.egress import EgressDep

router = APIRouter(prefix="/orgs/{org_id}/mcp-servers", tags=["mcp servers"])

ServerName = Annotated[str, Path(pattern=SERVER_NAME_PATTERN, examples=["billing"])]
ToolName = Annotated[str, Path(pattern=TOOL_NAME_PATTERN, examples=["refund_order"])]
Admin = Annotated[OrgScope, require_in_org("tools.manage")]
UNREACHABLE = {502: ("mcp_server_unreachable", "the MCP server failed (ConnectError)")}


@router.post(
    "",
    response_model=McpServerRead,
    status_code=status.HTTP_201_CREATED,
    summary="Register an MCP server",
    description="Capability `tools.manage`. The URL must be http(s) without userinfo, "
    "fragment or query, https and resolving to public addresses only unless "
    "`HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS` allows it: otherwise 422 "
    "`integration_endpoint_refused` (details `field` `url`, `reason`) and no packet is "
    "sent to it. The platform then lists the server's tools (`tools/list`, with the bearer "
    "token): 422 `mcp_server_unreachable` when it cannot (the URL or the token given does not "
    "serve MCP), and nothing is stored. The token "
    "is encrypted like integration credentials and never returned. Every tool starts at "
    "risk `high`; the server's annotations are shown and never lower it. 409 "
    "`mcp_server_exists` for a name the org already uses.",
    responses=error_responses(
        401,
        403,
        404,
        409,
        422,
        503,
        codes={
            409: ("mcp_server_exists", "the org already has an MCP server 'billing'"),
            422: ("integration_endpoint_refused", "the endpoint is not allowed"),
        },
    ),
)
async def register(
    body: McpServerIn, session: Session, cipher: Cipher, egress: EgressDep, scope: Admin
) -> McpServerRead:
    return await service.register(session, cipher, egress, scope, body)


@router.get(
    "",
    response_model=list[McpServerRead],
    summary="List the org's MCP servers",
    description="Capability `tools.manage`. Each server and its tools as last discovered.",
    responses=error_responses(401, 403, 404, 422),
)
async def list_servers(session: Session, scope: Admin) -> list[McpServerRead]:
    return await service.listing(session, scope)


@router.get(
    "/{name}",
    response_model=McpServerRead,
    summary="Read one MCP server",
    description="Capability `tools.manage`. 404 for a name the org has not registered.",
    responses=error_responses(401, 403, 404, 422),
)
async def get_server(session: Session, scope: Admin, name: ServerName) -> McpServerRead:
    return await service.get(session, scope, name)


@router.post(
    "/{name}/refresh",
    response_model=McpServerRead,
    summary="Discover an MCP server's tools again",
    description="Capability `tools.manage`. Lists the server's tools now; a tool whose "
    "definition (name, description, input schema) changed gets its new hash and loses the "
    "risk the admin set (back to `high`). A step pinned to the old definition does not run "
    "(`tool_definition_changed`). 502 `mcp_server_unreachable` leaves the tools as they were.",
    responses=error_responses(401, 403, 404, 422, 502, 503, codes=UNREACHABLE),
)
async def refresh(
    session: Session, cipher: Cipher, egress: EgressDep, scope: Admin, name: ServerName
) -> McpServerRead:
    return await service.refresh(session, cipher, egress, scope, name)


@router.put(
    "/{name}/tools/{tool}/risk",
    response_model=McpServerRead,
    summary="Set the risk of an MCP server's tool",
    description="Capability `tools.manage`. The least risk a step calling the tool must "
    "declare (the proxy refuses a step declared lower: `step_risk_below_tool`). 404 for a "
    "tool the server did not list.",
    responses=error_responses(401, 403, 404, 422),
)
async def set_risk(
    body: RiskPut, session: Session, scope: Admin, name: ServerName, tool: ToolName
) -> McpServerRead:
    return await service.set_risk(session, scope, name, tool, body.risk.value)


@router.delete(
    "/{name}",
    status_code=status.HTTP_204_NO_CONTENT,
    response_class=Response,
    summary="Delete an MCP server",
    description="Capability `tools.manage`. Its tools leave the org's catalog at once.",
    responses=error_responses(401, 403, 404, 422),
)
async def delete_server(session: Session, scope: Admin, name: ServerName) -> Response:
    await service.delete(session, scope, name)
    return Response(status_code=status.HTTP_204_NO_CONTENT)
