"""The `humanwork-platform` command: serve the API (default), run the migrations (as the
schema's owner when HUMANWORK_DATABASE_OWNER_URL is set), verify the audit log and sign its
checkpoints, re-encrypt integration credentials under the active key."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

from humanwork_core import collector, logs, tracing
from platform_api.settings import Settings


async def _migrate(settings: Settings) -> None:
    from platform_api.db import app_role_of, make_engine, migrate

    owner = settings.database_owner_url.get_secret_value() if settings.database_owner_url else None
    engine = make_engine(owner or settings.database_url)
    try:
        await migrate(engine, app_role=app_role_of(settings.database_url, owner))
    finally:
        await engine.dispose()


async def _rotate(settings: Settings) -> int:
    from platform_api.db import make_engine, make_sessionmaker
    from platform_api.integrations.crypto import CredentialCipher
    from platform_api.integrations.service import reencrypt_all
    from platform_api.mcp_servers import service as mcp_servers

    cipher = CredentialCipher.from_settings(settings)
    if cipher is None:
        raise SystemExit("HUMANWORK_CREDENTIALS_KEYS is not set")
    engine = make_engine(settings.database_url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            return await reencrypt_all(session, cipher) + await mcp_servers.reencrypt_all(
                session, cipher
            )
    finally:
        await engine.dispose()


def _serve(settings: Settings, host: str, port: int) -> None:
    """uvicorn with uvloop and httptools (the loop and HTTP parsing in C; see
    docs/performance.md) and the garbage collector tuned for serving
    (`humanwork_core.collector`), over TLS when a certificate is configured (reloaded when its
    files change: platform_api.tls)."""
    import uvicorn

    from platform_api.app import create_app
    from platform_api.tls import ReloadingConfig

    tracing.setup("humanwork-platform")
    collector.tune()  # fewer collections of the requests' short-lived objects
    options: dict[str, Any] = {}
    if settings.tls_cert_file and settings.tls_key_file:
        options = {
            "ssl_certfile": str(settings.tls_cert_file),
            "ssl_keyfile": str(settings.tls_key_file),
        }
    config = ReloadingConfig(
        create_app(settings),
        host=host,
        port=port,
        proxy_headers=False,
        loop="uvloop",
        http="httptools",
        **options,
    )
    uvicorn.Server(config).run()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-platform", description=__doc__)
    sub = parser.add_subparsers(dest="command")
    serve = sub.add_parser("serve", help="serve the API (the default)")
    serve.add_argument("--host", default=None)
    serve.add_argument("--port", type=int, default=None)
    sub.add_parser("migrate", help="bring the database schema up to date")
    verify = sub.add_parser(
        "audit-verify", help="verify every audit hash chain against itself and its checkpoints"
    )
    verify.add_argument("--database-url", default=None)
    checkpoint = sub.add_parser(
        "audit-checkpoint", help="verify, then sign a checkpoint of every intact audit chain"
    )
    checkpoint.add_argument("--database-url", default=None)
    sub.add_parser(
        "rotate-credentials",
        help="re-encrypt every integration credential under HUMANWORK_CREDENTIALS_ACTIVE_KEY",
    )
    args = parser.parse_args(argv)
    logs.configure()
    logging.getLogger("alembic.runtime.plugins").setLevel(logging.WARNING)
    settings = Settings()
    if args.command == "migrate":
        asyncio.run(_migrate(settings))
        return 0
    if args.command == "audit-verify":
        from platform_api.audit.cli import run_verify

        return run_verify(settings, args.database_url)
    if args.command == "audit-checkpoint":
        from platform_api.audit.cli import run_checkpoint

        return run_checkpoint(settings, args.database_url)
    if args.command == "rotate-credentials":
        print(f"re-encrypted {asyncio.run(_rotate(settings))} credential(s)")
        return 0
    host = getattr(args, "host", None) or settings.host
    port = getattr(args, "port", None) or settings.port
    _serve(settings, host, port)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
