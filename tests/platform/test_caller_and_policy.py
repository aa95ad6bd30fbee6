"""The decision routes' caller statement (PostgreSQL): `floor.accounts.principal_in_on_driver`
answers the caller as `principal_of` does and, in the same statement, the org of the
namespace named (its id, its deactivated flag, its stored policy) only when the caller is
a member of it: what `OrgRepository.policy_if_active` reads, for an org with a raised
quorum, a deactivated org, another org's namespace, a user of no org; and
`UserRepository.principal_in` on a session that does not autocommit (the SQLAlchemy path)
answers no org, so the decision reads it itself."""

from __future__ import annotations

import json
import uuid

from fastapi import FastAPI
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, AsyncSession

from platform_api.db import ENGINE, driver_connection
from platform_api.floor.accounts import UserRepository, principal_in_on_driver
from platform_api.orgs.repository import OrgRepository, stored_policy
from tests.platform.callers_support import ISSUER, sql, varied_callers
from tests.platform.conftest import Api, TwoOrgs


async def _namespaces(db: AsyncEngine) -> dict[str, str]:
    async with db.connect() as conn:
        rows = await conn.execute(text("SELECT CAST(id AS VARCHAR), namespace FROM orgs"))
        return {str(r[0]): str(r[1]) for r in rows}


async def test_the_callers_statement_reads_the_policy_of_its_own_orgs_namespace_only(
    app: FastAPI, api: Api, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    await varied_callers(api, two_orgs, db)
    raised = {"requiredApprovals": {"high": 2}}
    await sql(
        db,
        "UPDATE orgs SET approval_policy = CAST(:p AS json) WHERE id = CAST(:o AS uuid)",
        p=json.dumps(raised),
        o=two_orgs.org_a,
    )
    namespaces = await _namespaces(db)
    ns_a, ns_b = namespaces[two_orgs.org_a], namespaces[two_orgs.org_b]
    engine = ENGINE.of(app.state)
    asks: list[dict[str, str]] = [
        {"username": u} for u in ("admin", "admin-a", "expert-a", "admin-b", "nobody", "ghost")
    ]
    asks.append({"issuer": ISSUER, "subject": "sub-x"})
    async with AsyncSession(engine) as session, driver_connection(engine) as driver:
        assert driver is not None
        users, orgs = UserRepository(session), OrgRepository(session)
        for ask in asks:
            for namespace in (ns_a, ns_b, "org-nowhere"):
                found = await principal_in_on_driver(driver, namespace, **ask)
                alone = await users.principal_of(**ask)
                if alone is None:
                    assert found is None, ask
                    continue
                assert found is not None and found[:2] == alone, (ask, namespace)
                org = found[2]
                member_of = [o for o, g in alone[1].items() if g.namespace == namespace]
                if not member_of:  # another org's namespace, or none: no org beside
                    assert org is None, (ask, namespace)
                    continue
                # the org as the decision's own read of it answers
                assert org is not None and org.id == member_of[0], (ask, namespace)
                read = await orgs.policy_if_active(org.id)
                assert (None if org.deactivated else stored_policy(org.policy)) == read
        # the answers the branches above compared, spelled out
        a = await principal_in_on_driver(driver, ns_a, username="expert-a")
        b = await principal_in_on_driver(driver, ns_b, username="admin")
        other = await principal_in_on_driver(driver, ns_b, username="expert-a")
        by_oidc = await principal_in_on_driver(driver, ns_a, issuer=ISSUER, subject="sub-x")
    assert a is not None and a[2] is not None
    assert a[2].id == uuid.UUID(two_orgs.org_a) and not a[2].deactivated
    assert stored_policy(a[2].policy).required_approvals.high == 2
    assert by_oidc is not None and by_oidc[2] == a[2]
    assert b is not None and b[2] is not None and b[2].deactivated
    assert b[2].id == uuid.UUID(two_orgs.org_b) and b[2].policy is None
    assert other is not None and other[2] is None  # expert-a is no member of org B


async def test_the_sqlalchemy_path_answers_the_caller_and_no_org(
    app: FastAPI, two_orgs: TwoOrgs, db: AsyncEngine
) -> None:
    ns_a = (await _namespaces(db))[two_orgs.org_a]
    async with AsyncSession(ENGINE.of(app.state)) as session:
        users = UserRepository(session)
        found = await users.principal_in(ns_a, username="expert-a")
        alone = await users.principal_of(username="expert-a")
        assert found is not None and alone is not None
        assert found == (*alone, None)
        assert await users.principal_in(ns_a, username="ghost") is None
