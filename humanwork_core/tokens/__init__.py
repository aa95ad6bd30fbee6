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

The package holds :mod:`.keys` (signing keys and key sets), :mod:`.claims` (mint, verify,
read back), :mod:`.rotation` (rotation and key retention planning) and :mod:`.errors`;
every name is re-exported here (`tokens.<name>`).
"""

from __future__ import annotations

from .claims import (
    AGENT_ROLE,
    DEFAULT_AGENT_SCOPES,
    DEFAULT_AUDIENCE,
    DEFAULT_ISSUER,
    DEFAULT_LEEWAY_SECONDS,
    AgentClaims,
    MintedToken,
    agent_subject,
    mint_agent_token,
    read_minted_token,
    verify_agent_token,
)
from .errors import (
    TokenError,
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
from .keys import (
    ALGORITHM,
    KeySet,
    SigningKey,
    generate_signing_key,
    jwk_thumbprint,
    jwks,
    public_jwk,
)
from .rotation import (
    DEFAULT_MAX_JITTER_SECONDS,
    KeyRetention,
    jitter_fraction,
    key_retention,
    rotation_due_at,
)

__all__ = [
    "AGENT_ROLE",
    "ALGORITHM",
    "DEFAULT_AGENT_SCOPES",
    "DEFAULT_AUDIENCE",
    "DEFAULT_ISSUER",
    "DEFAULT_LEEWAY_SECONDS",
    "DEFAULT_MAX_JITTER_SECONDS",
    "AgentClaims",
    "KeyRetention",
    "KeySet",
    "MintedToken",
    "SigningKey",
    "TokenError",
    "TokenExpired",
    "TokenInvalidSignature",
    "TokenMalformed",
    "TokenMissingScope",
    "TokenNotYetValid",
    "TokenRevoked",
    "TokenUnknownKey",
    "TokenWrongAudience",
    "TokenWrongIssuer",
    "TokenWrongOrg",
    "TokenWrongRole",
    "agent_subject",
    "generate_signing_key",
    "jitter_fraction",
    "jwk_thumbprint",
    "jwks",
    "key_retention",
    "mint_agent_token",
    "public_jwk",
    "read_minted_token",
    "rotation_due_at",
    "verify_agent_token",
]
