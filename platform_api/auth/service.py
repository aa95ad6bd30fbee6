"""Login: check a local user's password and issue a token; failures are audited."""

from __future__ import annotations

import asyncio

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from platform_api.audit.service import record_detached
from platform_api.auth.passwords import verify_password
from platform_api.auth.tokens import IssuedToken, TokenService
from platform_api.errors import Unauthenticated
from platform_api.users.repository import UserRepository


async def login(
    session: AsyncSession,
    sessions: async_sessionmaker[AsyncSession],
    tokens: TokenService,
    username: str,
    password: str,
) -> IssuedToken:
    """A token for `username` when `password` is right; `Unauthenticated` otherwise."""
    user = await UserRepository(session).by_username(username)
    stored = user.password_hash if user else None
    if not await asyncio.to_thread(verify_password, stored, password) or user is None:
        await record_detached(
            sessions,
            actor=username,
            action="auth.login_failed",
            target=f"user:{username}",
            details={},
        )
        raise Unauthenticated("wrong username or password")
    return tokens.issue(user.username, user.role)
