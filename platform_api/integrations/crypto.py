"""AES-256-GCM sealing of integration credentials.

Each value is encrypted under the active key with a fresh 96-bit nonce; the org id and
integration type are bound as associated data, so a ciphertext copied to another org or
type fails to decrypt. The key id stored next to it lets old rows be read (and
re-encrypted by `rotate-credentials`) after the active key changes.
"""

from __future__ import annotations

import base64
import binascii
import os
import uuid
from dataclasses import dataclass
from typing import Annotated

from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from fastapi import Depends

from platform_api.settings import Settings
from platform_api.slots import Slot

NONCE_LENGTH = 12


def associated_data(org_id: uuid.UUID, integration_type: str) -> bytes:
    """What a credential is bound to."""
    return f"humanwork-credential\x00{org_id}\x00{integration_type}".encode()


@dataclass(frozen=True)
class Sealed:
    """An encrypted credential."""

    key_id: str
    nonce: bytes
    ciphertext: bytes


class CredentialCipher:
    """Encrypts with the active key; decrypts with whichever key a row names."""

    def __init__(self, keys: dict[str, bytes], active: str) -> None:
        if active not in keys:
            raise ValueError(f"active credentials key {active!r} is not among the keys")
        for key_id, key in keys.items():
            if len(key) != 32:
                raise ValueError(f"credentials key {key_id!r} is not 32 bytes (AES-256)")
        self._keys = {k: AESGCM(v) for k, v in keys.items()}
        self.active = active

    @classmethod
    def from_settings(cls, settings: Settings) -> CredentialCipher | None:
        """The cipher of the configured keys, or None when none are configured."""
        if not settings.credentials_keys:
            return None
        keys: dict[str, bytes] = {}
        for key_id, secret in settings.credentials_keys.items():
            try:
                keys[key_id] = base64.b64decode(secret.get_secret_value(), validate=True)
            except binascii.Error:
                raise ValueError(f"credentials key {key_id!r} is not valid base64") from None
        active = settings.credentials_active_key or sorted(keys)[-1]
        return cls(keys, active)

    def seal(self, org_id: uuid.UUID, integration_type: str, plaintext: bytes) -> Sealed:
        nonce = os.urandom(NONCE_LENGTH)
        aead = self._keys[self.active]
        ciphertext = aead.encrypt(nonce, plaintext, associated_data(org_id, integration_type))
        return Sealed(self.active, nonce, ciphertext)

    def open(self, org_id: uuid.UUID, integration_type: str, sealed: Sealed) -> bytes:
        aead = self._keys[sealed.key_id]
        return aead.decrypt(
            sealed.nonce, sealed.ciphertext, associated_data(org_id, integration_type)
        )


CIPHER: Slot[CredentialCipher | None] = Slot("cipher")
Cipher = Annotated[CredentialCipher | None, Depends(CIPHER)]
"""The credential cipher, None when no key is configured."""
