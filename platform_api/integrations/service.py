"""Integration credential use cases: store (encrypt), delete, list what is configured,
re-encrypt everything under the active key. Values never leave this module in clear."""

from __future__ import annotations

import json

from sqlalchemy.ext.asyncio import AsyncSession

from platform_api.errors import NotFound, Unavailable
from platform_api.floor.audit.service import record
from platform_api.floor.principal import OrgScope
from platform_api.integrations.crypto import CredentialCipher, Sealed
from platform_api.integrations.repository import IntegrationRepository
from platform_api.integrations.schemas import IntegrationPut
from platform_api.models import IntegrationCredential, utcnow
from platform_api.tools.upstreams.egress import Egress, check_credentials


def _cipher(cipher: CredentialCipher | None) -> CredentialCipher:
    if cipher is None:
        raise Unavailable("integration credentials are not configured (HUMANWORK_CREDENTIALS_KEYS)")
    return cipher


async def put_credentials(
    session: AsyncSession,
    cipher: CredentialCipher | None,
    scope: OrgScope,
    integration_type: str,
    body: IntegrationPut,
    egress: Egress,
) -> IntegrationCredential:
    """Check the endpoints the credentials name (`EgressRefused`, 422, nothing stored),
    then encrypt and store (or replace) them."""
    sealer = _cipher(cipher)
    values = {k: v.get_secret_value() for k, v in body.credentials.items()}
    await check_credentials(integration_type, values, egress)
    plaintext = json.dumps(values, sort_keys=True).encode()
    sealed = sealer.seal(scope.org_id, integration_type, plaintext)
    repo = IntegrationRepository(session)
    credential = await repo.get(scope.org_id, integration_type)
    replaced = credential is not None
    was = {"key_id": credential.key_id} if credential is not None else None
    if credential is None:
        credential = IntegrationCredential(org_id=scope.org_id, type=integration_type)
    credential.key_id, credential.nonce, credential.ciphertext = (
        sealed.key_id,
        sealed.nonce,
        sealed.ciphertext,
    )
    credential.updated_at = utcnow()
    credential.updated_by = scope.principal.username
    await repo.save(credential)
    await record(
        session,
        actor=scope.principal.username,
        action="integration.updated",
        target=f"integration:{integration_type}",
        org_id=scope.org_id,
        details={
            "key_id": sealed.key_id,
            "replaced": replaced,
            "fields": sorted(body.credentials),
            # before and after, by key id and field names (never a value)
            "before": was,
            "after": {"key_id": sealed.key_id, "fields": sorted(body.credentials)},
        },
    )
    return credential


async def delete_credentials(session: AsyncSession, scope: OrgScope, integration_type: str) -> None:
    """Remove an integration's credentials; 404 when there are none."""
    repo = IntegrationRepository(session)
    credential = await repo.get(scope.org_id, integration_type)
    if credential is None:
        raise NotFound("no such integration")
    was = {"key_id": credential.key_id}
    await repo.delete(credential)
    await record(
        session,
        actor=scope.principal.username,
        action="integration.deleted",
        target=f"integration:{integration_type}",
        org_id=scope.org_id,
        details={"before": was, "after": None},
    )


async def list_credentials(session: AsyncSession, scope: OrgScope) -> list[IntegrationCredential]:
    return await IntegrationRepository(session).list_for(scope.org_id)


async def reencrypt_all(session: AsyncSession, cipher: CredentialCipher) -> int:
    """Re-encrypt every stored credential under the active key; how many changed."""
    changed = 0
    for credential in await IntegrationRepository(session).all():
        if credential.key_id == cipher.active:
            continue
        old = Sealed(credential.key_id, credential.nonce, credential.ciphertext)
        sealed = cipher.seal(
            credential.org_id, credential.type, cipher.open(credential.org_id, credential.type, old)
        )
        credential.key_id, credential.nonce, credential.ciphertext = (
            sealed.key_id,
            sealed.nonce,
            sealed.ciphertext,
        )
        await record(
            session,
            actor="system",
            action="integration.reencrypted",
            target=f"integration:{credential.type}",
            org_id=credential.org_id,
            details={"from_key_id": old.key_id, "to_key_id": sealed.key_id},
        )
        changed += 1
    await session.flush()
    return changed
