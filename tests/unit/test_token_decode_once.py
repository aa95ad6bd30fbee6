"""The platform's bearer tokens are decoded once per request: a built-in token is verified
in one `jwt.decode` (no unverified look at its issuer first), and every refusal still
refuses (a foreign issuer, a forged signature, an unsigned token, an expired one)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest

from platform_api.auth import tokens as tokens_module
from platform_api.auth.tokens import TokenService
from platform_api.errors import Unauthenticated
from platform_api.settings import Settings

SECRET = "a-test-secret-of-the-platform-0123456789abcdef"


@pytest.fixture
def service() -> TokenService:
    return TokenService(Settings(jwt_secret=SECRET))


@pytest.fixture
def decodes(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The options of every `jwt.decode` the token service makes."""
    seen: list[dict[str, Any]] = []
    real = jwt.decode

    def counting(token: str, *args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("options") or {})
        return real(token, *args, **kwargs)

    monkeypatch.setattr(tokens_module.jwt, "decode", counting)
    return seen


def _claims(**changes: Any) -> dict[str, Any]:
    now = datetime.now(UTC)
    claims = {
        "sub": "expert-a",
        "role": "expert",
        "iat": now,
        "nbf": now,
        "exp": now + timedelta(minutes=5),
        "iss": "humanwork-platform",
        "aud": "humanwork-platform",
        "jti": "j1",
    }
    return {**claims, **changes}


async def test_a_built_in_token_is_decoded_once(
    service: TokenService, decodes: list[dict[str, Any]]
) -> None:
    identity = await service.verify(service.issue("expert-a", "expert").token)
    assert identity.username == "expert-a"
    assert len(decodes) == 1
    assert decodes[0].get("verify_signature", True) is True  # the one decode verifies


@pytest.mark.parametrize(
    ("token", "message"),
    [
        (lambda: jwt.encode(_claims(), "another-key-0123456789abcdef-0123456789"), "invalid token"),
        (lambda: jwt.encode(_claims(iss="https://evil.example"), SECRET), "not trusted"),
        (lambda: jwt.encode(_claims(), None, algorithm="none"), "invalid token"),
        (
            lambda: jwt.encode(_claims(exp=datetime.now(UTC) - timedelta(minutes=1)), SECRET),
            "token expired",
        ),
        (lambda: jwt.encode(_claims(aud="another-service"), SECRET), "invalid token"),
        (lambda: "not.a.jwt", "malformed"),
    ],
    ids=["forged", "foreign issuer", "unsigned", "expired", "audience", "garbage"],
)
async def test_every_defect_is_still_refused(
    service: TokenService, token: Any, message: str
) -> None:
    with pytest.raises(Unauthenticated) as refused:
        await service.verify(token())
    assert message in str(refused.value)
