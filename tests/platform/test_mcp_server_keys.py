"""An org's MCP server's token at rest (PostgreSQL): sealed under the active credentials
key bound to the org and `mcp:<name>` (a copy under another name does not open), and
`rotate-credentials` re-encrypts it under the new key (once; the old key is then not
needed)."""

from __future__ import annotations

import base64
import uuid

import pytest
from cryptography.exceptions import InvalidTag
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from platform_api.db import make_engine, make_sessionmaker
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.mcp_servers import service
from platform_api.models import McpServer
from tests.platform.conftest import CREDENTIALS_KEY, TwoOrgs

TOKEN = "mcp-token-at-rest-0123"


async def test_the_token_is_sealed_to_its_server_and_rotates(
    two_orgs: TwoOrgs, database_url: str, db: AsyncEngine
) -> None:
    org = uuid.UUID(two_orgs.org_a)
    old = CredentialCipher({"k1": base64.b64decode(CREDENTIALS_KEY)}, "k1")
    sealed = old.seal(org, service.sealed_as("billing"), f"Bearer {TOKEN}".encode())
    server = McpServer(
        org_id=org,
        name="billing",
        url="https://mcp.example.com/mcp",
        auth_key_id=sealed.key_id,
        auth_nonce=sealed.nonce,
        auth_ciphertext=sealed.ciphertext,
        created_by="admin",
    )
    new_key = bytes(range(100, 132))
    both = CredentialCipher({"k1": base64.b64decode(CREDENTIALS_KEY), "k2": new_key}, "k2")
    engine = make_engine(database_url)
    try:
        async with make_sessionmaker(engine)() as session, session.begin():
            session.add(server)
        assert service.authorization(old, server) == f"Bearer {TOKEN}"
        with pytest.raises(InvalidTag):  # bound to its name: another server's row fails
            old.open(org, service.sealed_as("other"), sealed)
        async with make_sessionmaker(engine)() as session, session.begin():
            assert await service.reencrypt_all(session, both) == 1
        async with make_sessionmaker(engine)() as session, session.begin():
            assert await service.reencrypt_all(session, both) == 0
    finally:
        await engine.dispose()
    async with db.connect() as conn:
        key_id, nonce, ciphertext = (
            await conn.execute(
                text("SELECT auth_key_id, auth_nonce, auth_ciphertext FROM mcp_servers")
            )
        ).one()
        audited = (
            await conn.execute(
                text("SELECT count(*) FROM audit_log WHERE action = 'mcp_server.reencrypted'")
            )
        ).scalar_one()
    assert key_id == "k2" and audited == 1
    only_new = CredentialCipher({"k2": new_key}, "k2")
    opened = only_new.open(
        org, service.sealed_as("billing"), Sealed(key_id, bytes(nonce), bytes(ciphertext))
    )
    assert opened.decode() == f"Bearer {TOKEN}"
