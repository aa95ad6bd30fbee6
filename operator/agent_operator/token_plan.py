"""Pure decisions about an agent's platform token: the keyring it is signed with, the
tokens a revocation ends, whether to (re)issue it, when it is due for rotation, and the
status.token block (with the previous token's grace). No client and no framework: an
import contract keeps it so."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from agent_operator import builders
from humanwork_core import tokens
from humanwork_core.resources import (
    AgentInstance,
    TokenStatus,
)

LONGEST_TOKEN_TTL = timedelta(days=30)


@dataclass
class Keyring:
    """The operator's signing keys: the current one signs, the published ones verify."""

    current: tokens.SigningKey
    published: tuple[tokens.SigningKey, ...]
    callback_key: str = ""
    """The master key the instances' callback secrets are derived from."""


def revoked_tokens(
    previous: TokenStatus, stored: tokens.MintedToken | None, now: datetime
) -> dict[str, datetime]:
    """Pure: the jtis a revocation ends (jti -> when it would have expired): the token the
    status recorded, the one in the Secret, and a previous one still in its grace."""
    revoked = {previous.jti: previous.expires_at}
    if stored is not None:
        revoked[stored.claims.jti] = stored.claims.expires_at
    grace = previous.previous_grace_ends_at
    if previous.previous_jti and grace and grace > now:
        revoked[previous.previous_jti] = grace
    return revoked


@dataclass(frozen=True)
class TokenPlan:
    """Whether to keep the stored token or mint a new one, and why."""

    mint: bool
    reason: str


def plan_token(
    instance: AgentInstance,
    stored: tokens.MintedToken | None,
    keyring: Keyring,
    now: datetime,
) -> TokenPlan:
    """Pure: decide whether the agent's token must be (re)issued.

    A stored token other than the one the status names was written by a reconcile that
    did not get to its status write (a leader killed mid-rotation): it is that rotation,
    adopted as such (`RotationRecovered`), never followed by a second one; an agent may
    already hold it, and the status's token keeps its grace."""
    if stored is None:
        return TokenPlan(True, "Issued")
    if builders.REVOKE_TOKEN_ANNOTATION in instance.metadata.annotations:
        return TokenPlan(True, "Revoked")
    published = {k.kid for k in keyring.published}
    if stored.claims.kid not in published:
        return TokenPlan(True, "SigningKeyRetired")
    recorded = instance.status.token if instance.status else None
    if recorded is not None and recorded.jti != stored.claims.jti:
        return TokenPlan(False, "RotationRecovered")
    if builders.ROTATE_TOKEN_ANNOTATION in instance.metadata.annotations:
        return TokenPlan(True, "RotationRequested")
    due = tokens.rotation_due_at(
        stored.claims.issued_at,
        stored.claims.expires_at,
        instance.spec.token.rotate_before_seconds,
        instance.metadata.uid or instance.metadata.name,
    )
    if now >= due:
        return TokenPlan(True, "RotationDue")
    if stored.claims.org_id != instance.spec.org_id:
        return TokenPlan(True, "OrgChanged")
    return TokenPlan(False, "Current")


def seconds_until_rotation(body: dict[str, Any], now: datetime) -> float | None:
    """Pure: how long until the token recorded in the status is due for rotation (None when
    there is no token yet, 0 when it is due)."""
    instance = AgentInstance.model_validate(body)
    token = instance.status.token if instance.status else None
    if token is None:
        return None
    due = tokens.rotation_due_at(
        token.issued_at,
        token.expires_at,
        instance.spec.token.rotate_before_seconds,
        instance.metadata.uid or instance.metadata.name,
    )
    return max(0.0, (due - now).total_seconds())


def token_status(
    instance: AgentInstance,
    minted: tokens.MintedToken,
    previous: TokenStatus | None,
    rotated: bool,
    now: datetime,
    *,
    grace_seconds: int,
    revoked: bool = False,
) -> TokenStatus:
    """Pure: the status.token block; on rotation the old jti stays valid for a short grace
    (`grace_seconds`, at most until it expires); on revocation no earlier token stays."""
    claims = minted.claims
    prev_jti, grace = (None, None)
    if revoked:
        pass
    elif rotated and previous is not None and previous.jti != claims.jti:
        prev_jti = previous.jti
        grace = min(now + timedelta(seconds=grace_seconds), previous.expires_at)
    elif previous is not None and previous.jti == claims.jti:
        prev_jti, grace = previous.previous_jti, previous.previous_grace_ends_at
    return TokenStatus(
        kid=claims.kid,
        jti=claims.jti,
        issued_at=claims.issued_at,
        expires_at=claims.expires_at,
        previous_jti=prev_jti,
        previous_grace_ends_at=grace,
        secret_name=builders.token_secret_name(instance),
    )
