"""The callers both tests of the caller's statement ask about (`test_caller_driver.py`,
`test_caller_and_policy.py`): beside the two orgs' users, a user of no org, org B
deactivated, and `expert-a` bound to an OIDC identity (`ISSUER`, subject `sub-x`)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.platform.conftest import Api, TwoOrgs

ISSUER = "https://idp.example.test"


async def sql(db: AsyncEngine, statement: str, **params: Any) -> None:
    """One statement in a transaction of its own."""
    async with db.begin() as conn:
        await conn.execute(text(statement), params)


async def varied_callers(api: Api, two_orgs: TwoOrgs, db: AsyncEngine) -> None:
    """Add a user of no org (`nobody`), deactivate org B, bind `expert-a` to `sub-x`."""
    await api.user(two_orgs.admin, "nobody", "viewer", [])
    await sql(
        db, "UPDATE orgs SET deactivated_at = now() WHERE id = CAST(:o AS uuid)", o=two_orgs.org_b
    )
    await sql(
        db,
        "UPDATE users SET oidc_issuer = :i, oidc_subject = 'sub-x' WHERE username = 'expert-a'",
        i=ISSUER,
    )
