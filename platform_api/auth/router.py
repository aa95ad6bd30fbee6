"""`POST /auth/token`: exchange a username and password for a bearer JWT."""

from __future__ import annotations

from fastapi import APIRouter, Request

from platform_api.auth import service
from platform_api.auth.schemas import TokenRequest, TokenResponse
from platform_api.db import Session
from platform_api.errors import error_responses
from platform_api.state import PlatformDep

router = APIRouter(prefix="/auth", tags=["auth"])


@router.post(
    "/token",
    response_model=TokenResponse,
    summary="Log in",
    description="Exchange a local user's username and password for a signed bearer JWT "
    "(claims sub, role, iat, nbf, exp, iss, aud, jti). Org memberships and capabilities "
    "are looked up on every request, not carried in the token. Failed logins are "
    "throttled per username and per client address (`HUMANWORK_LOGIN_*`): over the limit, "
    "429 `login_throttled` with `Retry-After`, before the password is checked.",
    responses=error_responses(
        401, 422, 429, codes={429: ("login_throttled", "too many failed logins")}
    ),
)
async def issue_token(
    body: TokenRequest, request: Request, session: Session, platform: PlatformDep
) -> TokenResponse:
    issued = await service.login(
        session,
        platform.sessions,
        platform.tokens,
        platform.logins,
        body.username,
        body.password.get_secret_value(),
        request.client.host if request.client else "unknown",
    )
    return TokenResponse(access_token=issued.token, expires_at=issued.expires_at)
