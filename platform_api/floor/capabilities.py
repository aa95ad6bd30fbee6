"""On the shared floor: the capabilities the platform knows, and the one every way of
deciding needs.

Seed 001: "resume requires the run.control capability". Every path that decides a step
(approve and reject on the step endpoints, resume, bulk resume, resolving an unknown
outcome, reopening an expired decision; the workspace and the kubectl plugin use these
endpoints) names `DECIDE`, so no path asks for less than another.

`KNOWN` is what `PUT /access-map` accepts. Every capability an endpoint names through
`auth.dependencies.require` is added to it as the routers are imported (`declare`), so a
slice that adds a capability needs no edit here.
"""

from __future__ import annotations

DECIDE = "run.control"
"""What deciding a step needs, on every path (seed 001's resume)."""

ACCESS_MANAGE = "access.manage"
"""The platform administrator's: no role holds it (reading and changing the access map
needs `users.platform_admin`). Known so that a map naming it is refused with the reason."""

PLATFORM = frozenset({ACCESS_MANAGE})
"""Capabilities of the platform administrators, never of a role."""

ORG_GRANTABLE = "org.grantable"
"""A marker, not a permission: a role holding it may be given by an org's admins to their
members (within the admin's own capabilities in that org)."""

SELF_SCOPED = frozenset({"conversations.participate", "steps.confirm"})
"""A client's capabilities: they act only on the holder's own conversations and the steps
it started, so an org's admin gives them (the `client` role) without holding them (an
admin's role holds neither: it reads every conversation through `tasks.read`)."""

_KNOWN: set[str] = {
    "tasks.read",
    "run.control",
    "tools.manage",
    "agents.manage",
    "audit.read",
    "access.manage",
    "orgs.manage",
    "users.manage",
    "policy.manage",
    "org.grantable",
    "conversations.participate",
    "steps.confirm",
}


def declare(capability: str) -> str:
    """Record `capability` as one an endpoint checks; answers it."""
    _KNOWN.add(capability)
    return capability


def known() -> frozenset[str]:
    """Every capability the platform checks somewhere."""
    return frozenset(_KNOWN)
