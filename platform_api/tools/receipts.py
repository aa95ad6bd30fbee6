"""The platform's receipt signer and the store of receipts it gave.

`ReceiptSigner` holds the Ed25519 key that signs the tool proxy's receipts
(`humanwork_core.receipts`; `Settings.receipt_key_file`, a mounted Secret no database role
reads) and the verification set: the signing key's public half and the retired keys of
`Settings.receipt_verify_keys_file` (a JWK set), published at `GET /v1/receipt-keys` so
that anyone checks a receipt offline. Rotating the key: put the new key in the key file
and the old one's public JWK in the verify-keys file; receipts signed with the old key
still verify.

`task_receipts` reads the receipts kept with a task's ledger rows (`tool_calls.receipt`).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from fastapi import Depends
from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncSession

from humanwork_core import receipts
from humanwork_core.tokens import KeySet, SigningKey, jwks
from platform_api.errors import NotFound
from platform_api.floor.principal import Principal
from platform_api.models import Org, ToolCall
from platform_api.slots import Slot


@dataclass(frozen=True)
class ReceiptSigner:
    """The key receipts are signed with, and every key they may be verified with."""

    key: SigningKey
    retired: KeySet

    @classmethod
    def load(cls, key_file: Path, verify_keys_file: Path | None) -> ReceiptSigner:
        """The signer of a PKCS#8 PEM Ed25519 key file and an optional JWK set of retired
        keys (a missing file adds no key)."""
        retired = KeySet({})
        if verify_keys_file is not None and verify_keys_file.exists():
            retired = KeySet.from_jwks(json.loads(verify_keys_file.read_text()))
        return cls(SigningKey.from_pem(key_file.read_bytes()), retired)

    def sign(self, facts: receipts.Facts) -> dict[str, Any]:
        return receipts.sign(self.key, facts)

    def published(self) -> dict[str, list[dict[str, str]]]:
        """The JWK set receipts verify against: the current key first, then the retired."""
        old = [key for kid in sorted(self.retired.kids) if (key := self.retired.get(kid))]
        return jwks([self.key, *old])


async def task_receipts(
    session: AsyncSession, principal: Principal, namespace: str, name: str
) -> list[dict[str, Any]]:
    """The receipts of task `<namespace>/<name>`, oldest first; 404 `not_found` unless the
    namespace is one of the caller's orgs."""
    found = await session.execute(
        select(Org.id).where(Org.namespace == namespace, Org.id.in_(list(principal.org_ids)))
    )
    org_id: uuid.UUID | None = found.scalars().first()
    if org_id is None:
        raise NotFound("no such task")
    rows = await session.execute(
        select(ToolCall.receipt)
        .where(ToolCall.org_id == org_id, ToolCall.task == name, ToolCall.receipt.is_not(None))
        .order_by(ToolCall.finished_at, ToolCall.step)
    )
    return [dict(receipt) for receipt in rows.scalars() if receipt]


RECEIPTS: Slot[ReceiptSigner | None] = Slot("receipts")
Receipts = Annotated[ReceiptSigner | None, Depends(RECEIPTS)]
"""The tool proxy's receipt signer, None when no receipt key is configured."""
