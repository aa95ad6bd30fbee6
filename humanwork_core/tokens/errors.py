"""Why a token is refused: one :class:`TokenError` subclass per reason, each with its
stable `code`."""

from __future__ import annotations

from typing import ClassVar

from ..errors import HumanworkError


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
