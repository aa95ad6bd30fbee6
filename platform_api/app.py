"""The FastAPI application factory: `create_app(settings)`.

Building the app has no side effects; its lifespan connects to the database, runs the
migrations, creates the first admin and applies the access map override, then publishes
the shared `Platform` on `app.state`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from platform_api.access.repository import AccessMapRepository
from platform_api.audit.router import router as audit_router
from platform_api.audit.service import record
from platform_api.auth.router import router as auth_router
from platform_api.auth.tokens import TokenService
from platform_api.db import make_engine, make_sessionmaker, migrate
from platform_api.errors import install_error_handlers
from platform_api.health.router import router as health_router
from platform_api.integrations.crypto import CredentialCipher
from platform_api.integrations.router import router as integrations_router
from platform_api.orgs.namespaces import NoopOrgNamespaces, OrgNamespaces
from platform_api.orgs.router import router as orgs_router
from platform_api.settings import Settings
from platform_api.state import Platform
from platform_api.tools.router import router as tools_router
from platform_api.users.router import router as users_router
from platform_api.users.service import ensure_admin

DESCRIPTION = """
The humanwork platform API: where human experts decide what AI agents may do.

Authenticate with `POST /auth/token` (or a token of the configured OIDC issuer) and send
`Authorization: Bearer <token>`. Every endpoint names the capability it needs; roles map
to capabilities through the access map. Everything is scoped to the caller's orgs: another
org's resource answers 404. Every error has the body `{"code", "message", "details"}`.
"""

TAGS = [
    {"name": "auth", "description": "Log in."},
    {"name": "orgs", "description": "Client organisations."},
    {"name": "users", "description": "Users, roles and memberships."},
    {"name": "tool permissions", "description": "Which tools an org's agents may use."},
    {"name": "integrations", "description": "Encrypted third-party credentials."},
    {"name": "audit", "description": "The hash-chained audit log."},
    {"name": "health", "description": "Liveness."},
]


async def _bootstrap(platform: Platform) -> None:
    settings = platform.settings
    async with platform.sessions() as session, session.begin():
        password = settings.admin_password.get_secret_value() if settings.admin_password else None
        await ensure_admin(session, password)
        if settings.access_map:
            access = AccessMapRepository(session)
            current = await access.roles()
            wanted = {role: sorted(set(caps)) for role, caps in settings.access_map.items()}
            if any(current.get(role) != caps for role, caps in wanted.items()):
                for role, caps in wanted.items():
                    await access.replace(role, caps)
                await record(
                    session,
                    actor="system",
                    action="access_map.replaced",
                    target="access_map",
                    details={"roles": wanted},
                )


def create_app(settings: Settings, *, namespaces: OrgNamespaces | None = None) -> FastAPI:
    """The platform API for `settings`; `namespaces` defaults to `NoopOrgNamespaces`."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = make_engine(settings.database_url)
        try:
            if settings.migrate_on_startup:
                await migrate(engine)
            platform = Platform(
                settings=settings,
                engine=engine,
                sessions=make_sessionmaker(engine),
                tokens=TokenService(settings),
                namespaces=namespaces or NoopOrgNamespaces(),
                cipher=CredentialCipher.from_settings(settings),
            )
            await _bootstrap(platform)
            app.state.platform = platform
            yield
        finally:
            await engine.dispose()

    app = FastAPI(
        title="humanwork platform API",
        version="0.1.0",
        description=DESCRIPTION,
        openapi_tags=TAGS,
        lifespan=lifespan,
    )
    install_error_handlers(app)
    for router in (
        health_router,
        auth_router,
        orgs_router,
        users_router,
        tools_router,
        integrations_router,
        audit_router,
    ):
        app.include_router(router)
    return app
