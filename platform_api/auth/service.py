"""Login: check a local user's password and issue a token, throttling failed attempts.

The sign-in never holds a database connection while it waits for anything else: one
transaction checks and counts the attempt and reads the user, and commits; the password
is then verified on the password threads with no connection held; a second transaction
forgets the failures after a right password. A guess costs the guesser its back-off and
a place in the password threads' queue (behind the attempts of addresses without
failures lately), not a connection of the pool.

A failed attempt is logged (never with the password) but not audited one by one: an
attacker's guesses would otherwise fill the audit log. The audit log gets one
`auth.lockout` entry when a key (username and address, username, address) reaches its
limit.
"""

from __future__ import annotations

import logging

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.auth.dependencies import UserDeactivated
from platform_api.auth.signin import SignIn
from platform_api.auth.throttle import CLIENT, USERNAME, Attempt
from platform_api.auth.tokens import IssuedToken, TokenService
from platform_api.errors import Unauthenticated
from platform_api.floor.accounts import UserRepository
from platform_api.floor.audit.service import record_detached

log = logging.getLogger(__name__)


def _target(scope: str, attempt: Attempt) -> str:
    if scope == USERNAME:
        return f"user:{attempt.username}"
    if scope == CLIENT:
        return f"client:{attempt.client}"
    return f"user:{attempt.username} client:{attempt.client}"


async def login(
    signin: SignIn,
    sessions: async_sessionmaker[AsyncSession],
    tokens: TokenService,
    username: str,
    password: str,
    client: str,
) -> IssuedToken:
    """A token for `username` when `password` is right; `LoginThrottled` when a key of
    the attempt (the username from `client`, the caller's address; the username; the
    address) must still back off, before the password is checked; `Unauthenticated`
    otherwise (`UserDeactivated` for the right password of a deactivated user)."""
    async with sessions() as session, session.begin():
        attempt = await signin.throttle.begin(session, username, client)
        user = await UserRepository(session).by_username(username)
    # committed: the attempt is counted and the connection is back in the pool
    stored = user.password_hash if user else None
    right = await signin.passwords.verify(stored, password, priority=int(attempt.suspect))
    if right and user is not None:
        async with sessions() as session, session.begin():
            await signin.throttle.succeeded(session, attempt)
        if user.deactivated_at is not None:
            # the right password of a deactivated user: no token (it would be refused
            # at its first use anyway); said as such, the caller knows the password
            raise UserDeactivated("the user is deactivated")
        return tokens.issue(user.username, user.role)
    log.info("failed login for %r from %s", username[:100], client)
    for scope in attempt.reaches:
        await record_detached(
            sessions,
            actor=username,
            action="auth.lockout",
            target=_target(scope, attempt),
            details={"scope": scope, "client": client},
        )
    raise Unauthenticated("wrong username or password")
