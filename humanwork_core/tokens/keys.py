"""Ed25519 signing keys, named by their RFC 7638 JWK thumbprint, and the published key
set (JWKS) tokens are verified against."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

ALGORITHM = "EdDSA"


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _raw_public(public_key: Ed25519PublicKey) -> bytes:
    return public_key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def jwk_thumbprint(public_key: Ed25519PublicKey) -> str:
    """The RFC 7638 thumbprint (SHA-256, base64url) of an Ed25519 public key: its `kid`."""
    members = {"crv": "Ed25519", "kty": "OKP", "x": _b64url(_raw_public(public_key))}
    canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode("ascii")
    return _b64url(hashlib.sha256(canonical).digest())


def public_jwk(public_key: Ed25519PublicKey) -> dict[str, str]:
    """The RFC 8037 OKP JWK of an Ed25519 public key, with its thumbprint as `kid`."""
    return {
        "kty": "OKP",
        "crv": "Ed25519",
        "x": _b64url(_raw_public(public_key)),
        "kid": jwk_thumbprint(public_key),
        "use": "sig",
        "alg": ALGORITHM,
    }


class SigningKey:
    """An Ed25519 private key the operator signs agent tokens with, named by its `kid`."""

    __slots__ = ("_private_key", "_public_key", "kid")

    def __init__(self, private_key: Ed25519PrivateKey) -> None:
        self._private_key = private_key
        self._public_key = private_key.public_key()
        self.kid = jwk_thumbprint(self._public_key)

    @classmethod
    def from_pem(cls, pem: bytes | str) -> SigningKey:
        """Load an unencrypted PKCS#8 PEM Ed25519 private key; ValueError if it is not one."""
        data = pem.encode("ascii") if isinstance(pem, str) else pem
        key = serialization.load_pem_private_key(data, password=None)
        if not isinstance(key, Ed25519PrivateKey):
            raise ValueError(f"expected an Ed25519 private key, got {type(key).__name__}")
        return cls(key)

    def to_pem(self) -> bytes:
        """The private key as unencrypted PKCS#8 PEM (store it only in a Secret)."""
        return self._private_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )

    @property
    def private_key(self) -> Ed25519PrivateKey:
        return self._private_key

    @property
    def public_key(self) -> Ed25519PublicKey:
        return self._public_key

    def public_pem(self) -> bytes:
        """The public key as SubjectPublicKeyInfo PEM."""
        return self._public_key.public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def public_jwk(self) -> dict[str, str]:
        return public_jwk(self._public_key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SigningKey) and other.kid == self.kid

    def __hash__(self) -> int:
        return hash(self.kid)

    def __repr__(self) -> str:
        return f"SigningKey(kid={self.kid!r})"


def generate_signing_key() -> SigningKey:
    """A fresh random Ed25519 signing key."""
    return SigningKey(Ed25519PrivateKey.generate())


def jwks(public_keys: Iterable[Ed25519PublicKey | SigningKey]) -> dict[str, list[dict[str, str]]]:
    """The RFC 7517 JWK set publishing these keys (first occurrence of each kid kept)."""
    seen: set[str] = set()
    keys: list[dict[str, str]] = []
    for key in public_keys:
        jwk = key.public_jwk() if isinstance(key, SigningKey) else public_jwk(key)
        if jwk["kid"] not in seen:
            seen.add(jwk["kid"])
            keys.append(jwk)
    return {"keys": keys}


class KeySet:
    """Verification keys by kid, parsed once from a JWK set (parse and keep it for speed)."""

    __slots__ = ("_keys",)

    def __init__(self, keys: Mapping[str, Ed25519PublicKey]) -> None:
        self._keys = dict(keys)

    @classmethod
    def from_jwks(cls, document: Mapping[str, Any]) -> KeySet:
        """Parse a JWK set. Entries that are not OKP/Ed25519 signing keys are ignored;
        a broken Ed25519 entry raises ValueError (the published set is misconfigured)."""
        entries = document.get("keys")
        if not isinstance(entries, list):
            raise ValueError("a JWK set needs a `keys` list")
        keys: dict[str, Ed25519PublicKey] = {}
        for entry in entries:
            if not isinstance(entry, Mapping):
                raise ValueError("every JWK set entry must be an object")
            if entry.get("kty") != "OKP" or entry.get("crv") != "Ed25519":
                continue
            if entry.get("use", "sig") != "sig":
                continue
            x = entry.get("x")
            if not isinstance(x, str):
                raise ValueError("an Ed25519 JWK needs a string `x`")
            try:
                public_key = Ed25519PublicKey.from_public_bytes(_b64url_decode(x))
            except (ValueError, binascii.Error) as exc:
                raise ValueError(f"invalid Ed25519 JWK x: {exc}") from exc
            kid = entry.get("kid")
            keys[kid if isinstance(kid, str) and kid else jwk_thumbprint(public_key)] = public_key
        return cls(keys)

    @property
    def kids(self) -> frozenset[str]:
        return frozenset(self._keys)

    def get(self, kid: str) -> Ed25519PublicKey | None:
        return self._keys.get(kid)

    def __len__(self) -> int:
        return len(self._keys)
