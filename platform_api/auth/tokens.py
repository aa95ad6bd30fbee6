"""Bearer tokens: the built-in issuer (HS256 JWTs with sub, role, iat, nbf, exp, iss, aud,
jti) and, optionally, an external OIDC issuer whose keys come from its JWKS.

`TokenService.verify` answers who a valid token stands for (`TokenIdentity`): the
username of a built-in token, or the issuer and `sub` of an OIDC token; never an
editable claim such as `email` or `preferred_username`, which a user may be able to
set at the identity provider to another user's value. It raises `Unauthenticated` for
anything else: expired, not yet valid, forged, unsigned (`alg: none`), wrong issuer or
audience, missing claims.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import jwt
from fastapi import Depends

from platform_api.errors import Unauthenticated
from platform_api.settings import Settings
from platform_api.slots import Slot

log = logging.getLogger(__name__)

LOCAL_ALGORITHM = "HS256"
REQUIRED_CLAIMS = ["exp", "iat", "iss", "aud", "sub"]
VERIFIED_KEPT = 4096
"""Built-in tokens whose verified claims are kept (the oldest dropped first): an expert's
token is checked against the key, issuer and audience once, its times on every request."""


@dataclass(frozen=True)
class IssuedToken:
    """A token the built-in issuer handed out."""

    token: str
    expires_at: datetime
    jti: str


@dataclass(frozen=True)
class TokenIdentity:
    """Who a verified token stands for: a built-in token's `username`, or an OIDC
    token's `issuer` and `subject` (its `sub`), matched against the users' bound
    OIDC identities."""

    username: str | None = None
    issuer: str | None = None
    subject: str | None = None


class TokenService:
    """Issues the built-in tokens and verifies built-in and OIDC tokens."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        if settings.jwt_secret is not None:
            self._key = settings.jwt_secret.get_secret_value()
        else:
            log.warning("HUMANWORK_JWT_SECRET is unset: tokens use a random per-process key")
            self._key = secrets.token_urlsafe(48)
        self._jwks: jwt.PyJWKClient | None = None
        if settings.oidc_jwks_url:
            self._jwks = jwt.PyJWKClient(settings.oidc_jwks_url, cache_keys=True, timeout=10)
        self._verified: dict[str, dict[str, Any]] = {}
        """The claims of built-in tokens verified already, by the token's exact text."""

    def issue(self, username: str, role: str, now: datetime | None = None) -> IssuedToken:
        """A signed token for `username`."""
        now = now or datetime.now(UTC)
        expires = now + timedelta(seconds=self.settings.token_lifetime_seconds)
        jti = uuid.uuid4().hex
        claims = {
            "sub": username,
            "role": role,
            "iat": now,
            "nbf": now,
            "exp": expires,
            "iss": self.settings.jwt_issuer,
            "aud": self.settings.jwt_audience,
            "jti": jti,
        }
        token = jwt.encode(claims, self._key, algorithm=LOCAL_ALGORITHM)
        return IssuedToken(token, expires, jti)

    async def verify(self, token: str) -> TokenIdentity:
        """Who `token` stands for; `Unauthenticated` unless it is valid. A built-in token
        (every expert's request) is decoded once: verified at once against the local key,
        issuer and audience; only a token that key or issuer refuses is looked at again,
        for the OIDC issuer."""
        try:
            try:
                claims = self._verify_local(token)
                identity = TokenIdentity(username=claims["sub"])
            except (jwt.InvalidAlgorithmError, jwt.InvalidSignatureError, jwt.InvalidIssuerError):
                claims = await self._verify_foreign(token)
                identity = TokenIdentity(issuer=claims["iss"], subject=claims["sub"])
        except jwt.ExpiredSignatureError:
            raise Unauthenticated("token expired") from None
        except jwt.DecodeError as exc:
            if isinstance(exc, jwt.InvalidSignatureError):
                raise Unauthenticated("invalid token", reason=type(exc).__name__) from None
            raise Unauthenticated("malformed bearer token") from None
        except jwt.PyJWTError as exc:
            raise Unauthenticated("invalid token", reason=type(exc).__name__) from None
        name = claims["sub"]
        if not isinstance(name, str) or not name:
            raise Unauthenticated("token names no user")
        return identity

    async def _verify_foreign(self, token: str) -> dict[str, Any]:
        """A token the local key or issuer refused: the OIDC issuer's when it names it (and
        one is configured), else refused as it was."""
        issuer = jwt.decode(token, options={"verify_signature": False}).get("iss")
        if issuer == self.settings.jwt_issuer:  # ours, but its signature or algorithm is not
            raise jwt.InvalidSignatureError("the token's signature is not the platform's")
        if self._jwks is None or issuer != self.settings.oidc_issuer:
            raise Unauthenticated("token issuer is not trusted")
        return await self._verify_oidc(token)

    def _verify_local(self, token: str) -> dict[str, Any]:
        """The claims of a built-in token. Its signature, algorithm, issuer, audience and
        claims are properties of its exact text and this process's key, so a token verified
        once is not decoded again; its times (expiry, not before, issued at) are checked on
        every request, as `jwt.decode` checks them."""
        kept = self._verified.get(token)
        if kept is not None:
            _check_times(kept, time.time())
            return kept
        claims: dict[str, Any] = jwt.decode(
            token,
            self._key,
            algorithms=[LOCAL_ALGORITHM],
            audience=self.settings.jwt_audience,
            issuer=self.settings.jwt_issuer,
            options={"require": [*REQUIRED_CLAIMS, "jti"]},
        )
        if len(self._verified) >= VERIFIED_KEPT:
            del self._verified[next(iter(self._verified))]
        self._verified[token] = claims
        return claims

    async def _verify_oidc(self, token: str) -> dict[str, Any]:
        assert self._jwks is not None
        jwks = self._jwks
        try:
            signing_key = await asyncio.to_thread(jwks.get_signing_key_from_jwt, token)
        except jwt.PyJWKClientError as exc:
            raise Unauthenticated("no matching OIDC signing key", reason=str(exc)) from None
        claims: dict[str, Any] = jwt.decode(
            token,
            signing_key.key,
            algorithms=self.settings.oidc_algorithms,
            audience=self.settings.oidc_audience or self.settings.jwt_audience,
            issuer=self.settings.oidc_issuer,
            options={"require": REQUIRED_CLAIMS},
        )
        return claims


def _check_times(claims: dict[str, Any], now: float) -> None:
    """`jwt.decode`'s checks of a token's times (no leeway): expired at `exp`, not valid
    before `nbf` nor before it was issued (`iat`)."""
    if claims["exp"] <= now:
        raise jwt.ExpiredSignatureError("Signature has expired")
    if claims.get("nbf", now) > now or claims["iat"] > now:
        raise jwt.ImmatureSignatureError("The token is not yet valid")


TOKENS: Slot[TokenService] = Slot("tokens")
Tokens = Annotated[TokenService, Depends(TOKENS)]
"""The token service (issues and checks the platform's tokens)."""
