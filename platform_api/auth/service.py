"""Login: check a local user's password and issue a token, throttling failed attempts.

A failed attempt is logged (never with the password) but not audited one by one: an
attacker's guesses would otherwise fill the audit log. The audit log gets one
`auth.lockout` entry when a username or a client address reaches its limit.
"""

from __future__ import annotations

import asyncio
import logging

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.accounts.repository import UserRepository
from platform_api.audit.service import record_detached
from platform_api.auth.passwords import verify_password
from platform_api.auth.throttle import LoginThrottle
from platform_api.auth.tokens import IssuedToken, TokenService
from platform_api.errors import Unauthenticated

log = logging.getLogger(__name__)


async def login(
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    tokens: TokenService,
    throttle: LoginThrottle,
    username: str,
    password: str,
    client: str,
) -> IssuedToken:
    """A token for `username` when `password` is right; `LoginThrottled` when the
    username or `client` (the caller's address) failed too often lately, before the
    password is checked; `Unauthenticated` otherwise."""
    await throttle.check(username, client)
    user = await UserRepository(session).by_username(username)
    stored = user.password_hash if user else None
    if not await asyncio.to_thread(verify_password, stored, password) or user is None:
        log.info("failed login for %r from %s", username[:100], client)
        for scope in await throttle.failed(username, client):
            await record_detached(
                sessions,
                actor=username,
                action="auth.lockout",
                target=f"user:{username}" if scope == "username" else f"client:{client}",
                details={"scope": scope, "client": client},
            )
        raise Unauthenticated("wrong username or password")
    await throttle.succeeded(username)
    return tokens.issue(user.username, user.role)
