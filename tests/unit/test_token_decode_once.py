"""The platform's bearer tokens are decoded once: a built-in token is verified in one
`jwt.decode` (no unverified look at its issuer first), and not decoded again on its next
requests while its times are checked on each; every refusal still refuses (a foreign
issuer, a forged signature, an unsigned token, an expired one, a tampered copy of a token
verified before)."""

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


async def test_a_token_verified_once_is_not_decoded_again_but_its_expiry_still_counts(
    service: TokenService, decodes: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    token = jwt.encode(_claims(), SECRET)
    for _ in range(3):
        assert (await service.verify(token)).username == "expert-a"
    assert len(decodes) == 1
    later = datetime.now(UTC) + timedelta(minutes=6)  # past the token's expiry
    monkeypatch.setattr(tokens_module.time, "time", later.timestamp)
    with pytest.raises(Unauthenticated, match="token expired"):
        await service.verify(token)


async def test_a_tampered_copy_of_a_verified_token_is_refused(service: TokenService) -> None:
    token = jwt.encode(_claims(), SECRET)
    await service.verify(token)
    header, _payload, signature = token.split(".")
    other = jwt.encode(_claims(sub="admin"), "another-key-0123456789abcdef-0123456789")
    with pytest.raises(Unauthenticated, match="invalid token"):
        await service.verify(f"{header}.{other.split('.')[1]}.{signature}")
