"""Tool permission use cases: list an org's, set one (audited with before and after)."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import catalog
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.models import ToolPermission, utcnow
from platform_api.tools import config as tool_config
from platform_api.tools.repository import ToolPermissionRepository
from platform_api.tools.schemas import ToolPermissionUpdate
from platform_api.tools.upstreams.errors import UnknownTool


async def list_permissions(session: AsyncSession, scope: OrgScope) -> list[ToolPermission]:
    return await ToolPermissionRepository(session).list_for(scope.org_id)


async def set_permission(
    session: AsyncSession, scope: OrgScope, tool: str, body: ToolPermissionUpdate
) -> ToolPermission:
    """Create or replace the permission of `tool` (a tool of the action catalog, by its
    name or an alias) in the caller's org; UnknownTool for any other."""
    known = catalog.find_tool(tool)
    if known is None:
        raise UnknownTool(f"no such tool {tool!r}; GET /tools lists them", details={"tool": tool})
    tool = known.name
    tool_config.parse(tool, body.config)  # 422 for what cannot be enforced
    repo = ToolPermissionRepository(session)
    permission = await repo.get(scope.org_id, tool)
    before = None if permission is None else permission.enabled
    # the configuration before and after, in the audit row
    was = None if permission is None else {"enabled": before, "config": dict(permission.config)}
    if permission is None:
        permission = ToolPermission(org_id=scope.org_id, tool=tool)
    permission.enabled = body.enabled
    permission.config = dict(body.config)
    permission.updated_at = utcnow()
    permission.updated_by = scope.principal.username
    await repo.save(permission)
    await record(
        session,
        actor=scope.principal.username,
        action="tool_permission.updated",
        target=f"tool:{tool}",
        org_id=scope.org_id,
        details={
            "enabled": body.enabled,
            "previously_enabled": before,
            "config": dict(body.config),
            "before": was,
            "after": {"enabled": body.enabled, "config": dict(body.config)},
        },
    )
    return permission
