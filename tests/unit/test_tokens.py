"""Agent tokens: minting and verification from both sides, the JWK set, rotation planning."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    Encoding,
    NoEncryption,
    PrivateFormat,
)

from humanwork_core.errors import HumanworkError
from humanwork_core.tokens import (
    DEFAULT_AGENT_SCOPES,
    KeySet,
    SigningKey,
    TokenError,
    agent_subject,
    generate_signing_key,
    jitter_fraction,
    jwk_thumbprint,
    jwks,
    key_retention,
    mint_agent_token,
    rotation_due_at,
    verify_agent_token,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
ORG = "3f2b8c1e-7d4a-4e9b-9c51-2a6f0d8e4b17"
OTHER_ORG = "9a1d2c3b-0000-4e9b-9c51-2a6f0d8e4b17"
AGENT = agent_subject("org-acme", "acme-ecommerce")
DAY = 86_400


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def b64url_json(value: Any) -> str:
    return b64url(json.dumps(value, separators=(",", ":")).encode())


def unb64url(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return generate_signing_key()


@pytest.fixture(scope="module")
def published(key: SigningKey) -> dict[str, Any]:
    return jwks([key])


def mint(key: SigningKey, **overrides: Any) -> tuple[str, Any]:
    args: dict[str, Any] = {
        "agent_id": AGENT,
        "org_id": ORG,
        "namespace": "org-acme",
        "ttl_seconds": DAY,
        "now": NOW,
    }
    args.update(overrides)
    return mint_agent_token(key, **args)


def refusal(token: str, keys: Any, **kwargs: Any) -> str:
    kwargs.setdefault("now", NOW)
    with pytest.raises(TokenError) as caught:
        verify_agent_token(token, keys, **kwargs)
    assert isinstance(caught.value, HumanworkError)
    return caught.value.code


def good_payload(**overrides: Any) -> dict[str, Any]:
    iat = int(NOW.timestamp())
    payload: dict[str, Any] = {
        "iss": "humanwork-operator",
        "aud": "humanwork-platform",
        "sub": AGENT,
        "org_id": ORG,
        "namespace": "org-acme",
        "role": "agent",
        "scopes": list(DEFAULT_AGENT_SCOPES),
        "iat": iat,
        "nbf": iat,
        "exp": iat + DAY,
        "jti": uuid.uuid4().hex,
    }
    payload.update(overrides)
    return payload


# --- The legitimate side -----------------------------------------------------------------


def test_mint_then_verify_round_trip(key: SigningKey, published: dict[str, Any]) -> None:
    token, claims = mint(key)
    header = jwt.get_unverified_header(token)
    assert header["alg"] == "EdDSA"
    assert header["kid"] == key.kid

    verified = verify_agent_token(
        token,
        published,
        audience="humanwork-platform",
        now=NOW + timedelta(hours=1),
        required_scopes=("tools:execute", "callbacks:write"),
        org_id=ORG,
        accepted_jtis={claims.jti},
    )
    assert verified == claims
    assert verified.subject == "org-acme/acme-ecommerce"
    assert verified.org_id == ORG
    assert verified.role == "agent"
    assert verified.scopes == (
        "conversations:read",
        "context:read",
        "tools:execute",
        "callbacks:write",
    )
    assert verified.issued_at == verified.not_before == NOW
    assert verified.expires_at == NOW + timedelta(days=1)
    assert len(verified.jti) == 32 and int(verified.jti, 16) >= 0


def test_raw_payload_has_the_documented_claims(key: SigningKey) -> None:
    token, _ = mint(key)
    payload = json.loads(unb64url(token.split(".")[1]))
    assert set(payload) == {
        "iss",
        "aud",
        "sub",
        "org_id",
        "namespace",
        "role",
        "scopes",
        "iat",
        "nbf",
        "exp",
        "jti",
    }
    assert payload["role"] == "agent"
    assert payload["exp"] - payload["iat"] == DAY


def test_every_token_gets_a_new_jti(key: SigningKey) -> None:
    jtis = {mint(key)[1].jti for _ in range(50)}
    assert len(jtis) == 50


def test_key_set_can_be_parsed_once_and_reused(key: SigningKey) -> None:
    token, claims = mint(key)
    keys = KeySet.from_jwks(jwks([key]))
    assert verify_agent_token(token, keys, now=NOW).jti == claims.jti


def test_token_of_a_retired_but_published_key_still_verifies(key: SigningKey) -> None:
    old = generate_signing_key()
    token, _ = mint(old)
    assert verify_agent_token(token, jwks([key, old]), now=NOW).kid == old.kid
    assert refusal(token, jwks([key])) == "token_unknown_key"


def test_leeway_bounds_on_expiry(key: SigningKey, published: dict[str, Any]) -> None:
    token, claims = mint(key, ttl_seconds=600)
    exp = claims.expires_at
    verify_agent_token(token, published, now=exp + timedelta(seconds=9), leeway_seconds=10)
    code = refusal(token, published, now=exp + timedelta(seconds=10), leeway_seconds=10)
    assert code == "token_expired"
    assert refusal(token, published, now=exp, leeway_seconds=0) == "token_expired"


def test_mint_refuses_bad_arguments(key: SigningKey) -> None:
    with pytest.raises(ValueError):
        mint(key, ttl_seconds=0)
    with pytest.raises(ValueError):
        mint(key, scopes=["tools:execute admin"])
    with pytest.raises(ValueError):
        mint(key, now=datetime(2026, 5, 1, 12))  # naive


# --- The attacker's side -----------------------------------------------------------------


def test_other_key_claiming_our_kid_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    attacker = generate_signing_key()
    token = jwt.encode(
        good_payload(), attacker.private_key, algorithm="EdDSA", headers={"kid": key.kid}
    )
    assert refusal(token, published) == "token_invalid_signature"


def test_key_not_in_the_set_is_refused(published: dict[str, Any]) -> None:
    token, _ = mint(generate_signing_key())
    assert refusal(token, published) == "token_unknown_key"


def test_expired_token_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, now=NOW - timedelta(days=2))
    assert refusal(token, published) == "token_expired"


def test_token_from_the_future_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, now=NOW + timedelta(minutes=5))
    assert refusal(token, published) == "token_not_yet_valid"


def test_token_for_another_org_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, org_id=OTHER_ORG)
    assert refusal(token, published, org_id=ORG) == "token_wrong_org"


def test_tampered_payload_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key)
    header, payload, signature = token.split(".")
    claims = json.loads(unb64url(payload))
    claims["org_id"] = OTHER_ORG
    forged = ".".join([header, b64url_json(claims), signature])
    assert refusal(forged, published) == "token_invalid_signature"
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    assert refusal(".".join([header, payload, flipped]), published) == "token_invalid_signature"


def test_wrong_audience_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, audience="some-other-service")
    assert refusal(token, published) == "token_wrong_audience"
    assert refusal(mint(key)[0], published, audience="billing") == "token_wrong_audience"


def test_missing_scope_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, scopes=["conversations:read", "context:read"])
    assert refusal(token, published, required_scopes=["tools:execute"]) == "token_missing_scope"


def test_revoked_jti_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, claims = mint(key)
    assert refusal(token, published, accepted_jtis={"previous-jti"}) == "token_revoked"
    assert refusal(token, published, accepted_jtis=set()) == "token_revoked"
    assert verify_agent_token(token, published, now=NOW, accepted_jtis={"previous-jti", claims.jti})


def test_non_agent_role_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token = jwt.encode(
        good_payload(role="admin"), key.private_key, algorithm="EdDSA", headers={"kid": key.kid}
    )
    assert refusal(token, published) == "token_wrong_role"


def test_other_issuer_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, issuer="someone-else")
    assert refusal(token, published) == "token_wrong_issuer"


def test_alg_none_is_refused(key: SigningKey, published: dict[str, Any]) -> None:
    for header in ({"alg": "none", "kid": key.kid}, {"alg": "none"}, {"alg": "None"}):
        token = f"{b64url_json(header)}.{b64url_json(good_payload())}."
        assert refusal(token, published) == "token_invalid_signature"


def test_hs256_with_the_public_key_as_secret_is_refused(
    key: SigningKey, published: dict[str, Any]
) -> None:
    jwk = key.public_jwk()
    candidates = [key.public_pem(), unb64url(jwk["x"]), jwk["x"].encode(), json.dumps(jwk).encode()]
    for secret in candidates:
        signing_input = f"{b64url_json({'alg': 'HS256', 'typ': 'JWT', 'kid': key.kid})}." + (
            b64url_json(good_payload())
        )
        mac = hmac.new(secret, signing_input.encode(), hashlib.sha256).digest()
        assert refusal(f"{signing_input}.{b64url(mac)}", published) == "token_invalid_signature"


def test_garbage_is_malformed(key: SigningKey, published: dict[str, Any]) -> None:
    for token in ("", "abc", "a.b.c", "eyJhbGciOiJFZERTQSJ9.!!!.xx"):
        assert refusal(token, published) == "token_malformed"
    no_kid = jwt.encode(good_payload(), key.private_key, algorithm="EdDSA")
    assert refusal(no_kid, published) == "token_malformed"


def test_signed_token_lacking_claims_is_malformed(
    key: SigningKey, published: dict[str, Any]
) -> None:
    payload = good_payload()
    del payload["org_id"]
    token = jwt.encode(payload, key.private_key, algorithm="EdDSA", headers={"kid": key.kid})
    assert refusal(token, published) == "token_malformed"
    wrong_type = jwt.encode(
        good_payload(scopes="tools:execute"),
        key.private_key,
        algorithm="EdDSA",
        headers={"kid": key.kid},
    )
    assert refusal(wrong_type, published) == "token_malformed"


def test_error_codes_serialise(key: SigningKey, published: dict[str, Any]) -> None:
    token, _ = mint(key, org_id=OTHER_ORG)
    with pytest.raises(TokenError) as caught:
        verify_agent_token(token, published, now=NOW, org_id=ORG)
    assert caught.value.to_dict()["code"] == "token_wrong_org"
    assert OTHER_ORG not in str(caught.value)


# --- Keys and the JWK set ----------------------------------------------------------------


def test_kid_is_the_rfc7638_thumbprint_of_the_rfc8037_example_key() -> None:
    # RFC 8037, appendix A.1 to A.3.
    private = Ed25519PrivateKey.from_private_bytes(
        unb64url("nWGxne_9WmC6hEr0kuwsxERJxWl7MmkZcDusAxyuf2A")
    )
    key = SigningKey(private)
    assert key.public_jwk()["x"] == "11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"
    assert key.kid == "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
    assert jwk_thumbprint(key.public_key) == key.kid


def test_pem_round_trip_keeps_the_key(key: SigningKey) -> None:
    pem = key.to_pem()
    assert pem.startswith(b"-----BEGIN PRIVATE KEY-----")
    again = SigningKey.from_pem(pem.decode())
    assert again == key and again.kid == key.kid
    token, _ = mint(again)
    assert verify_agent_token(token, jwks([key]), now=NOW)
    assert "PRIVATE" not in repr(key)


def test_pem_of_another_key_type_is_refused() -> None:
    pem = ec.generate_private_key(ec.SECP256R1()).private_bytes(
        Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
    )
    with pytest.raises(ValueError, match="Ed25519"):
        SigningKey.from_pem(pem)


def test_jwks_shape(key: SigningKey) -> None:
    other = generate_signing_key()
    document = jwks([key, other.public_key, key])
    assert list(document) == ["keys"]
    assert [entry["kid"] for entry in document["keys"]] == [key.kid, other.kid]
    for entry in document["keys"]:
        assert entry.keys() == {"kty", "crv", "x", "kid", "use", "alg"}  # never "d"
        assert (entry["kty"], entry["crv"], entry["use"], entry["alg"]) == (
            "OKP",
            "Ed25519",
            "sig",
            "EdDSA",
        )
        assert len(unb64url(entry["x"])) == 32
        assert "=" not in entry["x"]
    json.dumps(document)  # JSON-ready


def test_key_set_skips_foreign_keys_and_refuses_broken_ones(key: SigningKey) -> None:
    document = jwks([key])
    document["keys"].append({"kty": "RSA", "kid": "rsa", "n": "AQAB", "e": "AQAB"})
    document["keys"].append({**key.public_jwk(), "kid": "enc-only", "use": "enc"})
    assert KeySet.from_jwks(document).kids == {key.kid}
    with pytest.raises(ValueError):
        KeySet.from_jwks({"keys": [{"kty": "OKP", "crv": "Ed25519", "x": "AAAA"}]})
    with pytest.raises(ValueError):
        KeySet.from_jwks({"nokeys": []})


# --- Rotation planning -------------------------------------------------------------------


def test_rotation_is_deterministic_and_never_late() -> None:
    expires = NOW + timedelta(days=1)
    uid = str(uuid.uuid4())
    first = rotation_due_at(NOW, expires, 3600, uid)
    assert first == rotation_due_at(NOW, expires, 3600, uid)
    base = expires - timedelta(seconds=3600)
    assert base - timedelta(seconds=600) <= first <= base
    assert rotation_due_at(NOW, expires, 3600, uid, max_jitter_seconds=0) == base


def test_rotation_of_a_thousand_agents_is_spread_over_the_window() -> None:
    expires = NOW + timedelta(days=1)
    base = expires - timedelta(seconds=3600)
    uids = [str(uuid.uuid5(uuid.NAMESPACE_URL, f"agent-{i}")) for i in range(1000)]
    due = [rotation_due_at(NOW, expires, 3600, uid, max_jitter_seconds=600) for uid in uids]
    offsets = [(base - d).total_seconds() for d in due]
    assert all(0 <= offset < 600 for offset in offsets)
    per_second = Counter(int(offset) for offset in offsets)
    assert max(per_second.values()) <= 10  # without jitter: 1000 in one second
    assert len(per_second) >= 400  # ~485 expected for 1000 uniform draws into 600 seconds
    per_minute = Counter(int(offset // 60) for offset in offsets)
    assert len(per_minute) == 10
    assert all(60 <= count <= 140 for count in per_minute.values())


def test_rotation_window_is_bounded_for_short_tokens() -> None:
    expires = NOW + timedelta(seconds=300)
    uids = [f"uid-{i}" for i in range(200)]
    due = [rotation_due_at(NOW, expires, 60, uid) for uid in uids]
    base = expires - timedelta(seconds=60)
    # a tenth of the 240 seconds before the unjittered due time
    assert all(base - timedelta(seconds=24) <= d <= base for d in due)
    assert max(due) - min(due) > timedelta(seconds=20)


def test_rotation_window_as_long_as_the_token_rotates_at_once() -> None:
    expires = NOW + timedelta(seconds=300)
    assert rotation_due_at(NOW, expires, 300, "uid") == NOW


def test_jitter_fraction_depends_on_the_key() -> None:
    assert 0 <= jitter_fraction("a") < 1
    assert jitter_fraction("a") == jitter_fraction("a")
    assert jitter_fraction("a") != jitter_fraction("b")


# --- Key retention -----------------------------------------------------------------------


def test_key_retention_keeps_keys_until_their_last_token_expired() -> None:
    t0 = NOW - timedelta(days=10)
    t1 = NOW - timedelta(hours=30)  # k0 retired 30 h ago
    t2 = NOW - timedelta(hours=2)  # k1 retired 2 h ago
    keys = [("k1", t1), ("k0", t0), ("k2", t2)]
    plan = key_retention(keys, timedelta(days=1), NOW)
    assert plan.current == "k2"
    assert plan.publish == ("k2", "k1")
    assert plan.drop == ("k0",)
    assert plan.next_drop_at == t2 + timedelta(days=1, seconds=10)

    later = key_retention(keys, DAY, t2 + timedelta(days=1, seconds=10))
    assert later.publish == ("k2",)
    assert later.drop == ("k1", "k0")
    assert later.next_drop_at is None
    just_before = key_retention(keys, DAY, t2 + timedelta(days=1, seconds=9))
    assert just_before.publish == ("k2", "k1")


def test_key_retention_never_drops_the_current_key() -> None:
    plan = key_retention([("only", NOW - timedelta(days=365))], DAY, NOW)
    assert plan.current == "only"
    assert plan.publish == ("only",)
    assert plan.drop == ()
    with pytest.raises(ValueError):
        key_retention([], DAY, NOW)


def test_key_retention_works_with_signing_keys() -> None:
    old, new = generate_signing_key(), generate_signing_key()
    plan = key_retention(
        [(old, NOW - timedelta(hours=5)), (new, NOW - timedelta(hours=1))], DAY, NOW
    )
    assert plan.current is new
    document = jwks(plan.publish)
    assert [entry["kid"] for entry in document["keys"]] == [new.kid, old.kid]
