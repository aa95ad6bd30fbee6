"""`POST /auth/token`: exchange a username and password for a bearer JWT."""

from __future__ import annotations

from fastapi import APIRouter, Request

from platform_api.auth import service
from platform_api.auth.schemas import TokenRequest, TokenResponse
from platform_api.auth.signin import Logins
from platform_api.auth.tokens import Tokens
from platform_api.db import Sessions
from platform_api.errors import error_responses

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post(
    "/token",
    response_model=TokenResponse,
    summary="Log in",
    description="Exchange a local user's username and password for a signed bearer JWT "
    "(claims sub, role, iat, nbf, exp, iss, aud, jti). Org memberships and capabilities "
    "are looked up on every request, not carried in the token. Failed logins are "
    "throttled per username and client address together, with looser ceilings per "
    "username and per address (`HUMANWORK_LOGIN_*`); a key over its limit backs off: "
    "429 `login_throttled` with `Retry-After` (growing with each further failure), "
    "before the password is checked. The client address is the peer's, or the one a "
    "trusted proxy (`HUMANWORK_TRUSTED_PROXIES`) put in `X-Forwarded-For`.",
    responses=error_responses(
        401, 422, 429, codes={429: ("login_throttled", "too many failed logins")}
    ),
)
async def issue_token(
    body: TokenRequest, request: Request, logins: Logins, sessions: Sessions, tokens: Tokens
) -> TokenResponse:
    # no request session: the sign-in takes one connection at a time (auth.service)
    issued = await service.login(
        logins,
        sessions,
        tokens,
        body.username,
        body.password.get_secret_value(),
        logins.proxies.client_of(request),
    )
    return TokenResponse(access_token=issued.token, expires_at=issued.expires_at)
