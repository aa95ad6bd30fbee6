"""Access map use cases: read it; replace it after checking that every capability is one
the platform knows, every role is named and holds something, no role holds a platform
administrator's capability (`access.manage`: the map is the platform administrators',
never a role's, so no map change can lock them out or hand it to an org), and no role a
membership holds disappears. Audited with before and after in the platform's chain.

The map holds the org roles; `org.grantable` marks those an org's admins may give their
members (`users.grants`).

Capabilities are read from the database on every request (`auth.dependencies`), so a
change is in effect on every replica at the next request, without a restart.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.access_map.repository import AccessMapRepository
from platform_api.errors import ValidationFailed
from platform_api.floor import capabilities
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record
from platform_api.floor.principal import Principal
from platform_api.models import AccessGrant


class UnknownCapability(ValidationFailed):
    """A capability the platform checks nowhere (a typo would grant nothing)."""

    code = "unknown_capability"


class InvalidRole(ValidationFailed):
    """A role that holds no capability, or that users hold and the new map leaves out."""

    code = "invalid_role"


class PlatformCapability(ValidationFailed):
    """A role holding a platform administrator's capability (no role may)."""

    code = "platform_capability"


def normalised(roles: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Each role's capabilities sorted and unique, roles sorted."""
    return {role: sorted(set(caps)) for role, caps in sorted(roles.items())}


def check_capabilities(roles: Mapping[str, Sequence[str]]) -> None:
    """422 `unknown_capability` or `invalid_role` for a map that could not be meant."""
    known = capabilities.known()
    for role, caps in roles.items():
        if not caps:
            raise InvalidRole("a role must hold at least one capability", role=role)
        unknown = sorted(set(caps) - known)
        if unknown:
            raise UnknownCapability(
                "unknown capability", role=role, capabilities=", ".join(unknown)
            )
    check_platform(roles)


def check_platform(roles: Mapping[str, Sequence[str]]) -> None:
    """422 `platform_capability` for a role holding a platform administrator's capability."""
    for role, caps in roles.items():
        platform = sorted(set(caps) & capabilities.PLATFORM)
        if platform:
            raise PlatformCapability(
                "platform administrators hold this capability, never a role",
                role=role,
                capabilities=", ".join(platform),
            )


async def check_users(session: AsyncSession, roles: Mapping[str, Sequence[str]]) -> None:
    """422 when a role a membership holds would vanish."""
    held = await UserRepository(session).roles_held()
    orphaned = sorted(role for role in held if role not in roles)
    if orphaned:
        raise InvalidRole("users hold roles the new map leaves out", roles=", ".join(orphaned))


async def read(session: AsyncSession) -> dict[str, list[str]]:
    """The stored map."""
    return normalised(await AccessMapRepository(session).roles())


async def replace(
    session: AsyncSession, principal: Principal, roles: Mapping[str, Sequence[str]]
) -> dict[str, list[str]]:
    """Replace the whole map (in the caller's transaction); answers the new map."""
    wanted = normalised(roles)
    check_capabilities(wanted)
    # one change of the map at a time: each starts from the map the last one left
    await session.execute(select(AccessGrant.role).with_for_update())
    await check_users(session, wanted)
    access = AccessMapRepository(session)
    before = normalised(await access.roles())
    if before == wanted:
        return wanted
    for role in set(before) - set(wanted):
        await access.replace(role, ())
    for role, caps in wanted.items():
        await access.replace(role, caps)
    await record(
        session,
        actor=principal.username,
        action="access_map.changed",
        target="access_map",
        details={"before": before, "after": wanted},
    )
    return wanted
