"""Database access of an org's MCP servers and their tools (always by org)."""

from __future__ import annotations

import uuid
from collections.abc import Collection

from sqlalchemy import delete, select, tuple_
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.models import McpServer, McpTool

ToolKey = tuple[str, str]
"""(server name, tool name) of one of an org's MCP tools."""


class McpServerRepository:
    """Reads and writes one org's MCP servers and the tools they listed."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list_for(self, org_id: uuid.UUID) -> list[McpServer]:
        result = await self.session.execute(
            select(McpServer).where(McpServer.org_id == org_id).order_by(McpServer.name)
        )
        return list(result.scalars())

    async def all_with_auth(self) -> list[McpServer]:
        result = await self.session.execute(
            select(McpServer).where(McpServer.auth_key_id.is_not(None)).with_for_update()
        )
        return list(result.scalars())

    async def get(self, org_id: uuid.UUID, name: str) -> McpServer | None:
        result = await self.session.execute(
            select(McpServer).where(McpServer.org_id == org_id, McpServer.name == name)
        )
        return result.scalar_one_or_none()

    async def tools(self, server_id: uuid.UUID) -> list[McpTool]:
        result = await self.session.execute(
            select(McpTool).where(McpTool.server_id == server_id).order_by(McpTool.name)
        )
        return list(result.scalars())

    async def tool(self, server_id: uuid.UUID, name: str) -> McpTool | None:
        return await self.session.get(McpTool, (server_id, name))

    async def tools_named(
        self, org_id: uuid.UUID, keys: Collection[ToolKey]
    ) -> dict[ToolKey, McpTool]:
        """The org's stored tools named by `keys`, by key, in one query (absent: none)."""
        result = await self.session.execute(
            select(McpServer.name, McpTool)
            .join(McpServer, McpTool.server_id == McpServer.id)
            .where(McpServer.org_id == org_id, tuple_(McpServer.name, McpTool.name).in_(list(keys)))
        )
        return {(server, tool.name): tool for server, tool in result.all()}

    async def save(self, row: McpServer | McpTool) -> None:
        self.session.add(row)
        await self.session.flush()

    async def replace_tools(self, server_id: uuid.UUID, tools: list[McpTool]) -> None:
        await self.session.execute(delete(McpTool).where(McpTool.server_id == server_id))
        self.session.add_all(tools)
        await self.session.flush()

    async def delete(self, server: McpServer) -> None:
        await self.session.execute(delete(McpTool).where(McpTool.server_id == server.id))
        await self.session.delete(server)
        await self.session.flush()
