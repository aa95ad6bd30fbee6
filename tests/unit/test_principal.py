"""The principal's view: capabilities come from the role in each org, `holding` narrows
to the orgs whose role holds a capability, `in_org` to one org, and nothing outside the
memberships is ever in view."""

from __future__ import annotations

import uuid

from platform_api.floor.principal import Grant, Principal

A, B, C = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
ADMIN = Grant("admin", frozenset({"tasks.read", "tools.manage", "users.manage"}))
VIEWER = Grant("viewer", frozenset({"tasks.read"}))


def dual() -> Principal:
    return Principal(uuid.uuid4(), "dual", {A: ADMIN, B: VIEWER})


def test_capabilities_come_from_the_role_in_each_org() -> None:
    who = dual()
    assert who.org_ids == {A, B}
    assert who.can_in(A, "tools.manage") and not who.can_in(B, "tools.manage")
    assert not who.can_in(C, "tasks.read")
    assert who.role_in(A) == "admin" and who.role_in(B) == "viewer" and who.role_in(C) is None
    assert who.capabilities_in(C) == frozenset()


def test_holding_narrows_to_the_orgs_whose_role_holds_the_capability() -> None:
    managing = dual().holding("tools.manage")
    assert managing.org_ids == {A}
    assert managing.capabilities == ADMIN.capabilities
    assert not managing.can_in(B, "tasks.read")  # out of view, whatever the role there
    assert dual().holding("tasks.read").org_ids == {A, B}
    assert dual().holding("audit.read").org_ids == frozenset()


def test_in_org_narrows_to_one_org_and_never_widens() -> None:
    who = dual()
    assert who.in_org(B).org_ids == {B} and who.in_org(B).role == "viewer"
    assert who.in_org(C).org_ids == frozenset()
    assert who.holding("tools.manage").in_org(B).org_ids == frozenset()
    assert not Principal(uuid.uuid4(), "nobody", {}).can("tasks.read")
