"""On the shared floor (`platform_api.floor`): database access of users and memberships,
and the caller's identity in one query (`principal_of`: the user and, per membership, the
org, the role there and that role's capabilities, read fresh on every request; on the
decision routes, `principal_in`: the same statement with the stored policy of the org
owning the path's namespace beside it). Read by sign-in, the request's principal (`auth`)
and several slices; `platform_api.users` is their HTTP side."""

from __future__ import annotations

import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    ColumnElement,
    Select,
    String,
    bindparam,
    case,
    cast,
    delete,
    func,
    select,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.db import autocommit_driver
from platform_api.errors import Conflict
from platform_api.floor.principal import Grant
from platform_api.models import AccessGrant, Membership, Org, User

SEPARATOR = "\n"
"""Between aggregated memberships (no org id, role or capability holds a line break)."""
FIELD = " "
"""Between a membership's org id, role, the org's deactivated flag (`1` or `0`) and
namespace, and the role's capabilities (none holds a space)."""
CAPABILITY = ","
"""Between a role's capabilities (a capability holds no comma: `access_map.schemas`)."""


def _grants(joined: str | None) -> dict[uuid.UUID, Grant]:
    """`org role deactivated namespace cap,cap` lines back into grants."""
    out: dict[uuid.UUID, Grant] = {}
    for line in joined.split(SEPARATOR) if joined else []:
        org, role, off, namespace, caps = [*line.split(FIELD, 4), "", "", "", ""][:5]
        capabilities = frozenset(c for c in caps.split(CAPABILITY) if c)
        out[uuid.UUID(org)] = Grant(role, capabilities, off == "1", namespace)
    return out


@dataclass(frozen=True)
class Caller:
    """What a request needs of its user: who, whether a platform administrator, whether
    deactivated."""

    id: uuid.UUID
    username: str
    platform_admin: bool
    deactivated_at: datetime | None
    role: str = ""
    """The role the user was created with (a record: `/users/me` shows it)."""


def _principal_query(where: ColumnElement[bool]) -> Select[Any]:
    """The caller's row and its memberships as `org role deactivated namespace cap,cap`
    lines, in Core (no ORM entity to load on every request's hot path)."""
    users, members, grants = User.__table__.c, Membership.__table__.c, AccessGrant.__table__.c
    orgs = Org.__table__.c
    capabilities = (
        select(func.aggregate_strings(grants.capability, CAPABILITY))
        .where(grants.role == members.role)
        .scalar_subquery()
    )
    off = case((orgs.deactivated_at.is_(None), "0"), else_="1")
    line = cast(members.org_id, String) + FIELD + members.role + FIELD + off + FIELD
    line = line + orgs.namespace + FIELD + func.coalesce(capabilities, "")
    joined = (
        select(func.aggregate_strings(line, SEPARATOR))
        .select_from(Membership.__table__.join(Org.__table__, orgs.id == members.org_id))
        .where(members.user_id == users.id)
        .scalar_subquery()
    )
    return select(
        users.id, users.username, users.platform_admin, users.deactivated_at, joined, users.role
    ).where(where)


_USERS = User.__table__.c
_BY_USERNAME = _principal_query(_USERS.username == bindparam("username"))
_BY_OIDC = _principal_query(
    (_USERS.oidc_issuer == bindparam("issuer")) & (_USERS.oidc_subject == bindparam("subject"))
)
"""Built once: SQLAlchemy keeps a statement's cache key, so each request only binds."""

_CAPABILITIES_SQL = (
    "(SELECT string_agg(access_map.capability, ',') FROM access_map"
    " WHERE access_map.role = memberships.role)"
)
_LINE_SQL = (
    "CAST(memberships.org_id AS VARCHAR) || ' ' || memberships.role || ' ' ||"
    " CASE WHEN orgs.deactivated_at IS NULL THEN '0' ELSE '1' END || ' ' ||"
    f" orgs.namespace || ' ' || coalesce({_CAPABILITIES_SQL}, '')"
)


def _principal_sql(extra: str = "") -> str:
    """The caller's statement up to its `WHERE`, with `extra` columns after the six."""
    return (
        "SELECT users.id, users.username, users.platform_admin, users.deactivated_at,"
        f" (SELECT string_agg({_LINE_SQL}, E'\\n') FROM memberships"
        " JOIN orgs ON orgs.id = memberships.org_id WHERE memberships.user_id = users.id),"
        f" users.role{extra} FROM users WHERE "
    )


_BY_USERNAME_WHERE = "users.username = $1::varchar"
_BY_OIDC_WHERE = "users.oidc_issuer = $1::varchar AND users.oidc_subject = $2::varchar"
BY_USERNAME_DRIVER = _principal_sql() + _BY_USERNAME_WHERE
BY_OIDC_DRIVER = _principal_sql() + _BY_OIDC_WHERE
"""The same statements as the driver (asyncpg) takes them, on PostgreSQL: the same SQL
as `_BY_USERNAME` and `_BY_OIDC` compile to, its separators written in (the tests compare
both forms' rows), sent without SQLAlchemy's execution around it."""


def _policy_sql(namespace: str) -> str:
    """The stored approval policy of the org owning the namespace `namespace` (a
    parameter), of the caller's memberships only: NULL for another org's namespace (and
    for a member's org that set none: the caller's grants tell the two apart)."""
    return (
        ", (SELECT orgs.approval_policy FROM memberships JOIN orgs ON orgs.id ="
        " memberships.org_id WHERE memberships.user_id = users.id"
        f" AND orgs.namespace = {namespace}::varchar)"
    )


BY_USERNAME_IN_DRIVER = _principal_sql(_policy_sql("$2")) + _BY_USERNAME_WHERE
BY_OIDC_IN_DRIVER = _principal_sql(_policy_sql("$3")) + _BY_OIDC_WHERE
"""The caller's statement for a request naming a namespace (the decision routes'), built
once: beside the caller, the stored policy of that namespace's org when the caller is a
member of it, in the same statement (one round trip for both, one snapshot)."""


def _caller(row: Any) -> tuple[Caller, dict[uuid.UUID, Grant]]:
    user_id, name, platform_admin, deactivated_at, joined, role = row
    caller = Caller(user_id, name, bool(platform_admin), deactivated_at, str(role))
    return caller, _grants(joined)


async def principal_on_driver(
    driver: Any,
    *,
    username: str | None = None,
    issuer: str | None = None,
    subject: str | None = None,
) -> tuple[Caller, dict[uuid.UUID, Grant]] | None:
    """`UserRepository.principal_of` on an asyncpg connection (outside a transaction or in
    one): the same single statement, the same answer."""
    if username is not None:
        row = await driver.fetchrow(BY_USERNAME_DRIVER, username)
    else:
        row = await driver.fetchrow(BY_OIDC_DRIVER, issuer, subject)
    return None if row is None else _caller(row)


@dataclass(frozen=True, slots=True)
class OrgOfPath:
    """The org owning a request's namespace, of which the caller is a member, as the
    caller's own statement read it: its id, whether it is deactivated (its grant's flag)
    and its stored approval policy (None when it set none: the strict default)."""

    id: uuid.UUID
    deactivated: bool
    policy: Any


CallerIn = tuple[Caller, dict[uuid.UUID, Grant], OrgOfPath | None]
"""The caller, its grants and the org of the namespace named (None: not a member)."""


async def principal_in_on_driver(
    driver: Any,
    namespace: str,
    *,
    username: str | None = None,
    issuer: str | None = None,
    subject: str | None = None,
) -> CallerIn | None:
    """`principal_on_driver` and, in the same statement, the org owning `namespace` when
    the caller is a member of it (`OrgOfPath`), else None beside the caller."""
    if username is not None:
        row = await driver.fetchrow(BY_USERNAME_IN_DRIVER, username, namespace)
    else:
        row = await driver.fetchrow(BY_OIDC_IN_DRIVER, issuer, subject, namespace)
    if row is None:
        return None
    *principal, policy = row
    caller, grants = _caller(principal)
    for org_id, grant in grants.items():
        if grant.namespace == namespace:
            return caller, grants, OrgOfPath(org_id, grant.deactivated, policy)
    return caller, grants, None


class UserRepository:
    """Reads and writes users and their memberships."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def by_username(self, username: str) -> User | None:
        result = await self.session.execute(select(User).where(User.username == username))
        return result.scalar_one_or_none()

    async def get(self, user_id: uuid.UUID) -> User | None:
        return await self.session.get(User, user_id)

    async def by_oidc_identity(self, issuer: str, subject: str) -> User | None:
        """The user bound to this OIDC issuer and subject (`sub`)."""
        result = await self.session.execute(
            select(User).where(User.oidc_issuer == issuer, User.oidc_subject == subject)
        )
        return result.scalar_one_or_none()

    async def principal_of(
        self, *, username: str | None = None, issuer: str | None = None, subject: str | None = None
    ) -> tuple[Caller, dict[uuid.UUID, Grant]] | None:
        """The user named by `username` (else bound to the OIDC `issuer` and `subject`)
        and, per membership, its role and that role's capabilities, in one query
        (correlated aggregates, a statement built once), or None when there is no such
        user. On a session that autocommits (`db.autocommit_driver`) the statement goes to
        the driver directly."""
        driver = autocommit_driver(self.session)
        if driver is not None:
            return await principal_on_driver(
                driver, username=username, issuer=issuer, subject=subject
            )
        if username is not None:
            found = await self.session.execute(_BY_USERNAME, {"username": username})
        else:
            found = await self.session.execute(_BY_OIDC, {"issuer": issuer, "subject": subject})
        row = found.first()
        return None if row is None else _caller(row)

    async def principal_in(
        self,
        namespace: str,
        *,
        username: str | None = None,
        issuer: str | None = None,
        subject: str | None = None,
    ) -> CallerIn | None:
        """`principal_of` and the org owning `namespace` with its stored policy, in the
        same statement, on a session that autocommits (`principal_in_on_driver`);
        elsewhere (SQLite) `principal_of` alone, no org beside it (the caller reads the
        org's policy itself)."""
        driver = autocommit_driver(self.session)
        if driver is not None:
            return await principal_in_on_driver(
                driver, namespace, username=username, issuer=issuer, subject=subject
            )
        found = await self.principal_of(username=username, issuer=issuer, subject=subject)
        return None if found is None else (*found, None)

    async def org_ids(self, user_id: uuid.UUID) -> frozenset[uuid.UUID]:
        result = await self.session.execute(
            select(Membership.org_id).where(Membership.user_id == user_id)
        )
        return frozenset(result.scalars())

    async def orgs_holding(self, user_id: uuid.UUID, capability: str) -> frozenset[uuid.UUID]:
        """The orgs where the user's role holds `capability`; none once it is deactivated
        (one indexed read, for open streams checking their caller again)."""
        result = await self.session.execute(
            select(Membership.org_id)
            .join(User, User.id == Membership.user_id)
            .join(AccessGrant, AccessGrant.role == Membership.role)
            .where(
                Membership.user_id == user_id,
                User.deactivated_at.is_(None),
                AccessGrant.capability == capability,
            )
        )
        return frozenset(result.scalars())

    async def roles_of(self, user_id: uuid.UUID) -> dict[uuid.UUID, str]:
        """The user's role in each of its orgs."""
        result = await self.session.execute(
            select(Membership.org_id, Membership.role).where(Membership.user_id == user_id)
        )
        return {row[0]: str(row[1]) for row in result}

    async def add(self, user: User, org_ids: Iterable[uuid.UUID] = ()) -> User:
        """A new user, a member of `org_ids` with its own `role`."""
        self.session.add(user)
        try:
            await self.session.flush()
        except IntegrityError:
            raise Conflict(
                "a user with this username or OIDC identity exists", username=user.username
            ) from None
        await self.add_memberships(user.id, org_ids, user.role)
        return user

    async def add_memberships(
        self, user_id: uuid.UUID, org_ids: Iterable[uuid.UUID], role: str
    ) -> None:
        self.session.add_all(Membership(user_id=user_id, org_id=o, role=role) for o in org_ids)
        await self.session.flush()

    async def membership(
        self, org_id: uuid.UUID, username: str, *, lock: bool = False
    ) -> tuple[User, Membership] | None:
        """The user `username` and its membership of `org_id`, or None when it is none."""
        query = (
            select(User, Membership)
            .join(Membership, Membership.user_id == User.id)
            .where(Membership.org_id == org_id, User.username == username)
        )
        if lock:
            query = query.with_for_update(of=Membership)
        found = (await self.session.execute(query)).first()
        return None if found is None else (found[0], found[1])

    async def members(self, org_id: uuid.UUID) -> list[tuple[User, Membership]]:
        """Every member of `org_id` with its membership, by username."""
        rows = await self.session.execute(
            select(User, Membership)
            .join(Membership, Membership.user_id == User.id)
            .where(Membership.org_id == org_id)
            .order_by(User.username)
        )
        return [(row[0], row[1]) for row in rows]

    async def remove_membership(self, user_id: uuid.UUID, org_id: uuid.UUID) -> None:
        await self.session.execute(
            delete(Membership).where(Membership.user_id == user_id, Membership.org_id == org_id)
        )
        await self.session.flush()

    async def roles_held(self) -> dict[str, int]:
        """How many memberships hold each role."""
        rows = await self.session.execute(
            select(Membership.role, func.count()).group_by(Membership.role)
        )
        return {str(row[0]): int(row[1]) for row in rows}
