"""An agent token's claims: minting (the operator), verification (the platform API) and
reading back a token the operator minted."""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, NamedTuple

import jwt

from .errors import (
    TokenExpired,
    TokenInvalidSignature,
    TokenMalformed,
    TokenMissingScope,
    TokenNotYetValid,
    TokenRevoked,
    TokenUnknownKey,
    TokenWrongAudience,
    TokenWrongIssuer,
    TokenWrongOrg,
    TokenWrongRole,
)
from .keys import ALGORITHM, KeySet, SigningKey

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


_REQUIRED_CLAIMS = ("iss", "aud", "sub", "org_id", "role", "scopes", "iat", "nbf", "exp", "jti")


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
    payload, kid = _signed_payload(token, keys)
    claims = _claims_from_payload(payload, kid)
    audiences = payload["aud"] if isinstance(payload["aud"], list) else [payload["aud"]]
    if audience not in audiences:
        raise TokenWrongAudience("token is meant for another audience", expected=audience)
    claims = replace(claims, audience=audience)
    if claims.issuer != issuer:
        raise TokenWrongIssuer("token comes from another issuer", expected=issuer)
    _check_validity(payload, claims, now, leeway_seconds)
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


def _signed_payload(token: str, keys: KeySet) -> tuple[dict[str, Any], str]:
    """The payload of a compact JWS signed with EdDSA by a published key, and that key's id;
    raises when the structure, the algorithm, the key or the signature is wrong."""
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
    return payload, kid


def _check_validity(
    payload: Mapping[str, Any], claims: AgentClaims, now: datetime, leeway_seconds: int
) -> None:
    """`nbf` and `exp` against `now`, with `leeway_seconds` of clock skew."""
    current = _aware(now, "now").timestamp()
    if current + leeway_seconds < payload["nbf"]:
        raise TokenNotYetValid("token is not valid yet")
    if current - leeway_seconds >= payload["exp"]:
        raise TokenExpired("token has expired", expired_at=claims.expires_at.isoformat())
