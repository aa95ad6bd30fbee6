"""Agent platform tokens: Ed25519-signed JWTs, their public key set, and rotation planning.

The operator mints one token per AgentInstance with :func:`mint_agent_token` and keeps the
signing keys; the platform API checks every agent request with :func:`verify_agent_token`
against the published key set (:func:`jwks`). Keys are named by their RFC 7638 JWK
thumbprint (the `kid` header), so a key id can never be reused by another key.

Everything here is pure: the clock is always passed in (`now`), nothing reads the
environment or talks to the API server. Refusals raise a :class:`TokenError` subclass whose
stable `code` the platform API turns into its JSON error shape.

Codes: `token_malformed`, `token_invalid_signature` (also for any algorithm other than
EdDSA, such as `none` or HS256), `token_unknown_key`, `token_expired`,
`token_not_yet_valid`, `token_wrong_audience`, `token_wrong_issuer`, `token_wrong_role`,
`token_wrong_org`, `token_missing_scope`, `token_revoked`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Generic, NamedTuple, TypeVar

import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from .errors import HumanworkError

ALGORITHM = "EdDSA"
DEFAULT_ISSUER = "humanwork-operator"
DEFAULT_AUDIENCE = "humanwork-platform"
AGENT_ROLE = "agent"
DEFAULT_AGENT_SCOPES: tuple[str, ...] = (
    "conversations:read",
    "context:read",
    "tools:execute",
    "callbacks:write",
)
DEFAULT_LEEWAY_SECONDS = 10
"""Clock skew tolerated on `exp` and `nbf` between the operator and the platform API."""
DEFAULT_MAX_JITTER_SECONDS = 600
"""Widest spread of token rotations (see :func:`rotation_due_at`)."""

_REQUIRED_CLAIMS = ("iss", "aud", "sub", "org_id", "role", "scopes", "iat", "nbf", "exp", "jti")


# --- Errors ------------------------------------------------------------------------------


class TokenError(HumanworkError):
    """A token was refused; the subclass's `code` says why."""

    code: ClassVar[str] = "token_invalid"


class TokenMalformed(TokenError):
    code: ClassVar[str] = "token_malformed"


class TokenInvalidSignature(TokenError):
    code: ClassVar[str] = "token_invalid_signature"


class TokenUnknownKey(TokenError):
    code: ClassVar[str] = "token_unknown_key"


class TokenExpired(TokenError):
    code: ClassVar[str] = "token_expired"


class TokenNotYetValid(TokenError):
    code: ClassVar[str] = "token_not_yet_valid"


class TokenWrongAudience(TokenError):
    code: ClassVar[str] = "token_wrong_audience"


class TokenWrongIssuer(TokenError):
    code: ClassVar[str] = "token_wrong_issuer"


class TokenWrongRole(TokenError):
    code: ClassVar[str] = "token_wrong_role"


class TokenWrongOrg(TokenError):
    code: ClassVar[str] = "token_wrong_org"


class TokenMissingScope(TokenError):
    code: ClassVar[str] = "token_missing_scope"


class TokenRevoked(TokenError):
    code: ClassVar[str] = "token_revoked"


# --- Keys --------------------------------------------------------------------------------


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


# --- Claims, minting, verification -------------------------------------------------------


def _aware(value: datetime, name: str) -> datetime:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be timezone-aware")
    return value


def _unix(value: datetime, name: str) -> int:
    return int(_aware(value, name).timestamp())


def _from_unix(value: int) -> datetime:
    return datetime.fromtimestamp(value, tz=UTC)


def agent_subject(namespace: str, name: str) -> str:
    """The agent id used as `sub`: `<namespace>/<AgentInstance name>`."""
    return f"{namespace}/{name}"


@dataclass(frozen=True)
class AgentClaims:
    """The claims of an agent token (and `kid`, which travels in the protected header)."""

    issuer: str
    audience: str
    subject: str
    org_id: str
    namespace: str
    role: str
    scopes: tuple[str, ...]
    issued_at: datetime
    not_before: datetime
    expires_at: datetime
    jti: str
    kid: str

    def to_payload(self) -> dict[str, Any]:
        """The JWT payload (registered claims as unix seconds)."""
        return {
            "iss": self.issuer,
            "aud": self.audience,
            "sub": self.subject,
            "org_id": self.org_id,
            "namespace": self.namespace,
            "role": self.role,
            "scopes": list(self.scopes),
            "iat": _unix(self.issued_at, "issued_at"),
            "nbf": _unix(self.not_before, "not_before"),
            "exp": _unix(self.expires_at, "expires_at"),
            "jti": self.jti,
        }


class MintedToken(NamedTuple):
    """A freshly signed token and its claims; unpacks as `(token, claims)`."""

    token: str
    claims: AgentClaims


def mint_agent_token(
    key: SigningKey,
    *,
    agent_id: str,
    org_id: str,
    namespace: str,
    scopes: Iterable[str] = DEFAULT_AGENT_SCOPES,
    ttl_seconds: int,
    now: datetime,
    audience: str = DEFAULT_AUDIENCE,
    issuer: str = DEFAULT_ISSUER,
) -> MintedToken:
    """Sign a new agent token valid from `now` for `ttl_seconds`, with a fresh random jti.

    `agent_id` becomes `sub` (see :func:`agent_subject`); `namespace` is carried as a claim
    so the platform can find the AgentInstance whose current jti it must match.
    """
    if ttl_seconds <= 0:
        raise ValueError("ttl_seconds must be positive")
    scope_list = tuple(scopes)
    for scope in scope_list:
        if not scope or any(ch.isspace() for ch in scope):
            raise ValueError(f"invalid scope {scope!r}")
    for name, value in (("agent_id", agent_id), ("org_id", org_id), ("namespace", namespace)):
        if not value:
            raise ValueError(f"{name} must not be empty")
    issued = _from_unix(_unix(now, "now"))
    claims = AgentClaims(
        issuer=issuer,
        audience=audience,
        subject=agent_id,
        org_id=org_id,
        namespace=namespace,
        role=AGENT_ROLE,
        scopes=scope_list,
        issued_at=issued,
        not_before=issued,
        expires_at=issued + timedelta(seconds=ttl_seconds),
        jti=uuid.uuid4().hex,
        kid=key.kid,
    )
    token = jwt.encode(
        claims.to_payload(),
        key.private_key,
        algorithm=ALGORITHM,
        headers={"kid": key.kid, "typ": "JWT"},
    )
    return MintedToken(token, claims)


def _claims_from_payload(payload: Mapping[str, Any], kid: str) -> AgentClaims:
    missing = [name for name in _REQUIRED_CLAIMS if name not in payload]
    if missing:
        raise TokenMalformed("token lacks required claims", missing=",".join(missing))
    strings = ("iss", "sub", "org_id", "role", "jti")
    for name in strings:
        if not isinstance(payload[name], str):
            raise TokenMalformed(f"claim {name} must be a string")
    for name in ("iat", "nbf", "exp"):
        value = payload[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise TokenMalformed(f"claim {name} must be an integer (unix seconds)")
    scopes = payload["scopes"]
    if not isinstance(scopes, list) or not all(isinstance(s, str) for s in scopes):
        raise TokenMalformed("claim scopes must be a list of strings")
    aud = payload["aud"]
    if not isinstance(aud, str) and not (
        isinstance(aud, list) and aud and all(isinstance(a, str) for a in aud)
    ):
        raise TokenMalformed("claim aud must be a string or a list of strings")
    namespace = payload.get("namespace", "")
    if not isinstance(namespace, str):
        raise TokenMalformed("claim namespace must be a string")
    try:
        issued_at = _from_unix(payload["iat"])
        not_before = _from_unix(payload["nbf"])
        expires_at = _from_unix(payload["exp"])
    except (OverflowError, OSError, ValueError) as exc:
        raise TokenMalformed("token times are out of range") from exc
    return AgentClaims(
        issuer=payload["iss"],
        audience=aud if isinstance(aud, str) else aud[0],
        subject=payload["sub"],
        org_id=payload["org_id"],
        namespace=namespace,
        role=payload["role"],
        scopes=tuple(scopes),
        issued_at=issued_at,
        not_before=not_before,
        expires_at=expires_at,
        jti=payload["jti"],
        kid=kid,
    )


def verify_agent_token(
    token: str,
    jwks: Mapping[str, Any] | KeySet,
    *,
    audience: str = DEFAULT_AUDIENCE,
    now: datetime,
    required_scopes: Iterable[str] = (),
    org_id: str | None = None,
    accepted_jtis: Collection[str] | None = None,
    issuer: str = DEFAULT_ISSUER,
    leeway_seconds: int = DEFAULT_LEEWAY_SECONDS,
) -> AgentClaims:
    """Check an agent token and return its claims, or raise the :class:`TokenError` that says
    why it is refused.

    Checks, in order: structure; algorithm (EdDSA only); the key named by `kid` is in the set;
    signature; required claims; audience; issuer; `nbf` and `exp` against `now` with
    `leeway_seconds`; `role == "agent"`; `org_id` (when given); every required scope;
    and, when `accepted_jtis` is given (the AgentInstance's current and in-grace previous
    jti), that the jti is one of them.
    """
    keys = jwks if isinstance(jwks, KeySet) else KeySet.from_jwks(jwks)
    try:
        header = jwt.get_unverified_header(token)
    except jwt.PyJWTError as exc:
        raise TokenMalformed("token is not a compact JWS") from exc
    alg = header.get("alg")
    if alg != ALGORITHM:
        raise TokenInvalidSignature("token is not signed with EdDSA", alg=str(alg))
    kid = header.get("kid")
    if not isinstance(kid, str) or not kid:
        raise TokenMalformed("token header has no kid")
    public_key = keys.get(kid)
    if public_key is None:
        raise TokenUnknownKey("token is signed with a key that is not published", kid=kid)
    try:
        payload = jwt.decode(
            token,
            public_key,
            algorithms=[ALGORITHM],
            options={
                "verify_signature": True,
                "verify_exp": False,
                "verify_nbf": False,
                "verify_iat": False,
                "verify_aud": False,
                "verify_iss": False,
                "verify_sub": False,
                "verify_jti": False,
            },
        )
    except jwt.InvalidSignatureError as exc:
        raise TokenInvalidSignature("token signature does not verify", kid=kid) from exc
    except jwt.PyJWTError as exc:
        raise TokenMalformed(f"token cannot be decoded: {exc}") from exc

    claims = _claims_from_payload(payload, kid)
    audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
    if audience not in audiences:
        raise TokenWrongAudience("token is meant for another audience", expected=audience)
    claims = replace(claims, audience=audience)
    if claims.issuer != issuer:
        raise TokenWrongIssuer("token comes from another issuer", expected=issuer)
    current = _aware(now, "now").timestamp()
    if current + leeway_seconds < payload["nbf"]:
        raise TokenNotYetValid("token is not valid yet")
    if current - leeway_seconds >= payload["exp"]:
        raise TokenExpired("token has expired", expired_at=claims.expires_at.isoformat())
    if claims.role != AGENT_ROLE:
        raise TokenWrongRole("token is not an agent token", role=claims.role)
    if org_id is not None and claims.org_id != org_id:
        raise TokenWrongOrg("token belongs to another org")
    missing = [scope for scope in required_scopes if scope not in claims.scopes]
    if missing:
        raise TokenMissingScope("token lacks required scopes", missing=" ".join(missing))
    if accepted_jtis is not None and claims.jti not in accepted_jtis:
        raise TokenRevoked("token has been rotated out or revoked", jti=claims.jti)
    return claims


# --- Rotation planning -------------------------------------------------------------------


def jitter_fraction(jitter_key: str) -> float:
    """A deterministic number in [0, 1) derived from the SHA-256 of `jitter_key`."""
    digest = hashlib.sha256(jitter_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def rotation_due_at(
    issued_at: datetime,
    expires_at: datetime,
    rotate_before_seconds: int,
    jitter_key: str,
    *,
    max_jitter_seconds: int = DEFAULT_MAX_JITTER_SECONDS,
) -> datetime:
    """When to replace a token: `rotate_before_seconds` before it expires, moved earlier by a
    jitter derived from `jitter_key` (for example the AgentInstance uid), so that many
    tokens issued together do not all rotate in the same second.

    The jitter is within `[0, window)` where `window` is the smaller of `max_jitter_seconds`
    and a tenth of the time between issue and the unjittered due time; so a token is never
    rotated later than asked, nor in the first nine tenths of that time. A due time at or
    before `issued_at` (a rotation window as long as the token's life) is `issued_at`.
    """
    _aware(issued_at, "issued_at")
    _aware(expires_at, "expires_at")
    if rotate_before_seconds < 0 or max_jitter_seconds < 0:
        raise ValueError("rotate_before_seconds and max_jitter_seconds must be >= 0")
    base = expires_at - timedelta(seconds=rotate_before_seconds)
    if base <= issued_at:
        return issued_at
    window = min(float(max_jitter_seconds), (base - issued_at).total_seconds() / 10)
    return base - timedelta(seconds=window * jitter_fraction(jitter_key))


K = TypeVar("K")


@dataclass(frozen=True)
class KeyRetention(Generic[K]):
    """Which signing keys to publish and which can go.

    `current` is the newest key (the one to sign with); `publish` lists it first and then
    every retired key that may still have signed an unexpired token, newest first;
    `drop` lists the keys no unexpired token can name; `next_drop_at` is when the oldest
    published retired key can go (None when only the current key is published).
    """

    current: K
    publish: tuple[K, ...]
    drop: tuple[K, ...]
    next_drop_at: datetime | None


def key_retention(
    keys_with_created_at: Iterable[tuple[K, datetime]],
    longest_token_ttl: timedelta | int,
    now: datetime,
    *,
    leeway_seconds: int = DEFAULT_LEEWAY_SECONDS,
) -> KeyRetention[K]:
    """Decide which signing keys must stay in the published key set.

    A key signs tokens from its creation until the next key is created (its retirement);
    the last token it signed expires at most `longest_token_ttl` (plus the verifier's
    leeway) after that. So a retired key is published until then, and dropped after.
    Keys created at the same instant keep their input order (the later one is newer).
    """
    entries = [(key, _aware(created, "created_at")) for key, created in keys_with_created_at]
    if not entries:
        raise ValueError("there must be at least one signing key")
    ttl = (
        longest_token_ttl
        if isinstance(longest_token_ttl, timedelta)
        else timedelta(seconds=longest_token_ttl)
    )
    horizon = ttl + timedelta(seconds=leeway_seconds)
    _aware(now, "now")
    ordered = sorted(enumerate(entries), key=lambda item: (item[1][1], item[0]), reverse=True)
    newest = [entry for _, entry in ordered]
    current = newest[0][0]
    publish: list[K] = [current]
    drop: list[K] = []
    next_drop_at: datetime | None = None
    for (key, _created), (_newer, retired_at) in zip(newest[1:], newest, strict=False):
        last_expiry = retired_at + horizon
        if now < last_expiry:
            publish.append(key)
            next_drop_at = last_expiry if next_drop_at is None else min(next_drop_at, last_expiry)
        else:
            drop.append(key)
    return KeyRetention(
        current=current, publish=tuple(publish), drop=tuple(drop), next_drop_at=next_drop_at
    )


def read_minted_token(token: str) -> MintedToken:
    """The claims of a token this operator minted earlier (read back from its Secret), without
    verifying the signature: the operator only re-publishes it; the platform verifies."""
    try:
        header = jwt.get_unverified_header(token)
        payload = jwt.decode(token, options={"verify_signature": False})
    except jwt.PyJWTError as exc:
        raise TokenMalformed("stored token cannot be decoded") from exc
    kid = header.get("kid")
    if not isinstance(kid, str):
        raise TokenMalformed("stored token has no kid")
    return MintedToken(token, _claims_from_payload(payload, kid))
