"""Callback signatures: HMAC-SHA256 over timestamp and body, with a replay window."""

from __future__ import annotations

import hashlib
import hmac
import re
from datetime import UTC, datetime, timedelta

import pytest

from humanwork_core import signing
from humanwork_core.errors import HumanworkError
from humanwork_core.signing import (
    SignatureError,
    generate_secret,
    parse_header,
    sign,
    verify,
)

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
T = int(NOW.timestamp())
BODY = b'{"type":"task.step_executed","taskId":"t-1","idempotencyKey":"k-1"}'
SECRET = "0f" * 32


def refusal(secret: object, header: str | None, body: bytes | str, now: object) -> str:
    with pytest.raises(SignatureError) as caught:
        verify(secret, header, body, now)  # type: ignore[arg-type]
    assert isinstance(caught.value, HumanworkError)
    return caught.value.code


def test_round_trip_returns_the_timestamp() -> None:
    header = sign(SECRET, BODY, T)
    assert re.fullmatch(r"t=\d+,v1=[0-9a-f]{64}", header)
    assert verify(SECRET, header, BODY, T) == T
    assert verify(SECRET, sign(SECRET, BODY, NOW), BODY, NOW) == T


def test_mac_is_hmac_sha256_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, BODY, T) == f"t={T},v1={expected}"


def test_str_and_bytes_bodies_and_secrets_agree() -> None:
    assert sign(SECRET, BODY.decode(), T) == sign(SECRET.encode(), BODY, T)


def test_tampered_body_is_refused() -> None:
    header = sign(SECRET, BODY, T)
    assert refusal(SECRET, header, BODY.replace(b"t-1", b"t-2"), T) == "signature_mismatch"
    assert refusal(SECRET, header, BODY + b" ", T) == "signature_mismatch"


def test_wrong_secret_is_refused() -> None:
    header = sign(SECRET, BODY, T)
    assert refusal(generate_secret(), header, BODY, T) == "signature_mismatch"


def test_timestamp_is_bound_into_the_mac() -> None:
    header = sign(SECRET, BODY, T - 1000)
    moved = header.replace(f"t={T - 1000}", f"t={T}")
    assert refusal(SECRET, moved, BODY, T) == "signature_mismatch"


def test_old_timestamp_is_refused() -> None:
    header = sign(SECRET, BODY, NOW - timedelta(seconds=301))
    assert refusal(SECRET, header, BODY, NOW) == "signature_expired"
    assert verify(SECRET, sign(SECRET, BODY, T - 300), BODY, T) == T - 300
    assert verify(SECRET, header, BODY, NOW, tolerance_seconds=600) == T - 301


def test_future_timestamp_is_refused() -> None:
    header = sign(SECRET, BODY, T + 301)
    assert refusal(SECRET, header, BODY, T) == "signature_expired"
    assert verify(SECRET, sign(SECRET, BODY, T + 300), BODY, T) == T + 300


def test_missing_header_is_refused() -> None:
    assert refusal(SECRET, None, BODY, T) == "signature_missing"
    assert refusal(SECRET, "  ", BODY, T) == "signature_missing"


@pytest.mark.parametrize(
    "header",
    [
        "garbage",
        f"v1={'a' * 64}",  # no timestamp
        f"t={T}",  # no signature
        f"t={T},v1=xyz",  # not hex
        f"t={T},v1={'A' * 64}",  # upper case
        f"t={T},v1={'a' * 63}",  # short
        f"t=-5,v1={'a' * 64}",
        f"t=12.5,v1={'a' * 64}",
        f"t={T},t={T},v1={'a' * 64}",  # two timestamps
        f"t={T},v1={'a' * 64},bare",
        "t=1," + "v1=" + "a" * 2000,
    ],
)
def test_malformed_header_is_refused(header: str) -> None:
    assert refusal(SECRET, header, BODY, T) == "signature_malformed"


def test_unknown_schemes_are_ignored_and_any_v1_may_match() -> None:
    previous, current = generate_secret(), generate_secret()
    old_mac = sign(previous, BODY, T).split("v1=")[1]
    header = f"{sign(current, BODY, T)},v1={old_mac},v2=future"
    assert verify(current, header, BODY, T) == T
    assert verify(previous, header, BODY, T) == T
    assert parse_header(header) == (T, (sign(current, BODY, T).split("v1=")[1], old_mac))


def test_receiver_may_accept_several_secrets_during_rotation() -> None:
    previous, current = generate_secret(), generate_secret()
    header = sign(previous, BODY, T)
    assert verify([current, previous], header, BODY, T) == T
    assert refusal([current], header, BODY, T) == "signature_mismatch"
    with pytest.raises(ValueError):
        verify([], header, BODY, T)


def test_generated_secrets_are_long_and_distinct() -> None:
    secrets = {generate_secret() for _ in range(100)}
    assert len(secrets) == 100
    assert all(re.fullmatch(r"[0-9a-f]{64}", s) for s in secrets)


def test_empty_secret_and_naive_time_are_programming_errors() -> None:
    with pytest.raises(ValueError):
        sign("", BODY, T)
    with pytest.raises(ValueError):
        sign(SECRET, BODY, datetime(2026, 5, 1, 12))


def test_derived_secrets_differ_per_instance_and_incarnation() -> None:
    master = signing.generate_secret()
    one = signing.derive_secret(master, "org-acme", "support", "uid-1")
    assert one == signing.derive_secret(master, "org-acme", "support", "uid-1")
    assert len(one) == 64 and int(one, 16) >= 0
    others = {
        signing.derive_secret(master, "org-acme", "support", "uid-2"),
        signing.derive_secret(master, "org-beta", "support", "uid-1"),
        signing.derive_secret(master, "org-acme", "sales", "uid-1"),
        signing.derive_secret(signing.generate_secret(), "org-acme", "support", "uid-1"),
        # the separator keeps ("a", "bc") and ("ab", "c") apart
        signing.derive_secret(master, "org-acm", "esupport", "uid-1"),
    }
    assert one not in others and len(others) == 5
    with pytest.raises(ValueError):
        signing.derive_secret(master, "org-acme", "support", "")
