"""MCP server use cases of an org's admin: register (URL checked, tools discovered, auth
sealed), refresh, list, set a tool's risk, delete; and reading a server's auth for a call.
The auth never leaves this module in clear except to the server itself."""

from __future__ import annotations

import re
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import NotFound, Unavailable
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.mcp_servers import client, definitions
from platform_api.mcp_servers.errors import McpServerExists, McpServerUnreachable
from platform_api.mcp_servers.repository import McpServerRepository
from platform_api.mcp_servers.schemas import (
    TOOL_NAME_PATTERN,
    McpServerIn,
    McpServerRead,
    McpToolRead,
)
from platform_api.models import McpServer, McpTool, utcnow
from platform_api.tools.upstreams.egress import Egress

DISCOVERY_TIMEOUT_SECONDS = 20.0


def sealed_as(name: str) -> str:
    """What a server's auth is bound to (the cipher's associated data)."""
    return f"mcp:{name}"


def authorization(cipher: CredentialCipher | None, server: McpServer) -> str | None:
    """The server's `Authorization` header value, decrypted (None without auth)."""
    if server.auth_key_id is None or server.auth_nonce is None or server.auth_ciphertext is None:
        return None
    if cipher is None:
        raise Unavailable("integration credentials are not configured (HUMANWORK_CREDENTIALS_KEYS)")
    sealed = Sealed(server.auth_key_id, server.auth_nonce, server.auth_ciphertext)
    return cipher.open(server.org_id, sealed_as(server.name), sealed).decode()


async def discover(
    url: str, auth: str | None, egress: Egress, old: dict[str, McpTool]
) -> list[McpTool]:
    """The server's tools now, as rows (no server id yet); a tool whose definition did not
    change keeps the risk the admin set, a changed one is unmarked again (`high`). A tool
    whose name is not `TOOL_NAME_PATTERN` is left out."""
    async with client.connect(url, auth, egress, DISCOVERY_TIMEOUT_SECONDS) as connection:
        try:
            listed = await connection.tools()
        except Exception as exc:
            raise client.unreachable(exc, "not_sent") from None
    rows: list[McpTool] = []
    for tool in listed:
        if re.fullmatch(TOOL_NAME_PATTERN, tool.name) is None:
            continue  # not a name a step or a call can carry
        definition = definitions.definition_of(tool.name, tool.description, tool.inputSchema)
        digest = definitions.definition_hash(definition)
        before = old.get(tool.name)
        keep = before.risk if before is not None and before.definition_hash == digest else None
        annotations = tool.annotations.model_dump(exclude_none=True) if tool.annotations else None
        rows.append(
            McpTool(
                name=tool.name,
                definition=definition,
                definition_hash=digest,
                annotations=annotations,
                risk=keep,
            )
        )
    return rows


def read(server: McpServer, tools: list[McpTool]) -> McpServerRead:
    """The server as the API shows it (never its auth)."""
    return McpServerRead(
        name=server.name,
        url=server.url,
        stepTool=definitions.step_tool(server.name),
        hasAuth=server.auth_key_id is not None,
        createdBy=server.created_by,
        refreshedAt=server.refreshed_at,
        tools=[
            McpToolRead(
                name=t.name,
                description=str(t.definition.get("description") or ""),
                inputSchema=dict(t.definition.get("inputSchema") or {}),
                definitionHash=t.definition_hash,
                annotations=t.annotations,
                risk=definitions.tool_risk(t.risk),
                riskSet=t.risk is not None,
            )
            for t in tools
        ],
    )


async def register(
    session: AsyncSession,
    cipher: CredentialCipher | None,
    egress: Egress,
    scope: OrgScope,
    body: McpServerIn,
) -> McpServerRead:
    """Check the URL (`EgressRefused` 422), discover the tools (`McpServerUnreachable`,
    answered 422 here: the request's URL or token does not serve MCP), seal the auth,
    store."""
    repo = McpServerRepository(session)
    if await repo.get(scope.org_id, body.name) is not None:
        raise McpServerExists(f"the org already has an MCP server {body.name!r}")
    url = await client.check_server_url(body.url, egress)
    token = body.bearerToken.get_secret_value() if body.bearerToken is not None else None
    auth = f"Bearer {token}" if token else None
    server = McpServer(org_id=scope.org_id, name=body.name, url=url)
    if auth is not None:
        if cipher is None:
            raise Unavailable(
                "integration credentials are not configured (HUMANWORK_CREDENTIALS_KEYS)"
            )
        sealed = cipher.seal(scope.org_id, sealed_as(body.name), auth.encode())
        server.auth_key_id, server.auth_nonce = sealed.key_id, sealed.nonce
        server.auth_ciphertext = sealed.ciphertext
    try:
        tools = await discover(url, auth, egress, {})
    except McpServerUnreachable as exc:
        exc.status_code = 422  # the request's own URL (or token) does not serve MCP
        raise
    server.created_by = scope.principal.username
    server.refreshed_at = utcnow()
    await repo.save(server)
    for tool in tools:
        tool.server_id = server.id
    await repo.replace_tools(server.id, tools)
    await _audit(session, scope, "mcp_server.registered", server, {"url": url, **_summary(tools)})
    return read(server, tools)


async def refresh(
    session: AsyncSession,
    cipher: CredentialCipher | None,
    egress: Egress,
    scope: OrgScope,
    name: str,
) -> McpServerRead:
    """Discover the server's tools again (a changed tool loses the risk the admin set)."""
    repo = McpServerRepository(session)
    server = await _server(repo, scope, name)
    old = {t.name: t for t in await repo.tools(server.id)}
    tools = await discover(server.url, authorization(cipher, server), egress, old)
    changed = sorted(
        t.name for t in tools if t.name in old and old[t.name].definition_hash != t.definition_hash
    )
    for tool in tools:
        tool.server_id = server.id
    await repo.replace_tools(server.id, tools)
    server.refreshed_at = utcnow()
    await repo.save(server)
    await _audit(
        session, scope, "mcp_server.refreshed", server, {**_summary(tools), "changed": changed}
    )
    return read(server, tools)


async def listing(session: AsyncSession, scope: OrgScope) -> list[McpServerRead]:
    repo = McpServerRepository(session)
    return [read(s, await repo.tools(s.id)) for s in await repo.list_for(scope.org_id)]


async def get(session: AsyncSession, scope: OrgScope, name: str) -> McpServerRead:
    repo = McpServerRepository(session)
    server = await _server(repo, scope, name)
    return read(server, await repo.tools(server.id))


async def set_risk(
    session: AsyncSession, scope: OrgScope, name: str, tool_name: str, risk: str
) -> McpServerRead:
    """Set the risk of one of the server's tools."""
    repo = McpServerRepository(session)
    server = await _server(repo, scope, name)
    tool = await repo.tool(server.id, tool_name)
    if tool is None:
        raise NotFound(f"the MCP server {name!r} lists no tool {tool_name[:128]!r}")
    before, tool.risk = tool.risk, risk
    await repo.save(tool)
    await _audit(
        session,
        scope,
        "mcp_server.tool_risk_set",
        server,
        {
            "tool": tool_name,
            "definition_hash": tool.definition_hash,
            "before": before,
            "after": risk,
        },
    )
    return read(server, await repo.tools(server.id))


async def delete(session: AsyncSession, scope: OrgScope, name: str) -> None:
    repo = McpServerRepository(session)
    server = await _server(repo, scope, name)
    await _audit(session, scope, "mcp_server.deleted", server, {"url": server.url})
    await repo.delete(server)


async def _server(repo: McpServerRepository, scope: OrgScope, name: str) -> McpServer:
    server = await repo.get(scope.org_id, name)
    if server is None:
        raise NotFound(f"the org has no MCP server {name[:30]!r}")
    return server


def _summary(tools: list[McpTool]) -> dict[str, Any]:
    return {"tools": {t.name: t.definition_hash for t in tools}}


async def _audit(
    session: AsyncSession, scope: OrgScope, action: str, server: McpServer, details: dict[str, Any]
) -> None:
    await record(
        session,
        actor=scope.principal.username,
        action=action,
        target=f"mcp_server:{server.name}",
        org_id=scope.org_id,
        details={"server": server.name, **details},
    )


async def reencrypt_all(session: AsyncSession, cipher: CredentialCipher) -> int:
    """Re-encrypt every MCP server's auth under the active key (`rotate-credentials`);
    how many changed."""
    changed = 0
    for server in await McpServerRepository(session).all_with_auth():
        if server.auth_key_id == cipher.active:
            continue
        old_key = server.auth_key_id
        sealed = cipher.seal(
            server.org_id, sealed_as(server.name), (authorization(cipher, server) or "").encode()
        )
        server.auth_key_id, server.auth_nonce = sealed.key_id, sealed.nonce
        server.auth_ciphertext = sealed.ciphertext
        await record(
            session,
            actor="system",
            action="mcp_server.reencrypted",
            target=f"mcp_server:{server.name}",
            org_id=server.org_id,
            details={"from_key_id": old_key, "to_key_id": sealed.key_id},
        )
        changed += 1
    await session.flush()
    return changed
