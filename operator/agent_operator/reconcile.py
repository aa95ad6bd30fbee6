"""Reconcile one AgentInstance: the steps between the kopf handlers and the pure builders.

`reconcile` reads what it must (the org namespace, the token and callback Secrets, the
Deployment), decides with pure functions (`plan_token`, `derive_status`), applies the
children the builders describe (server-side apply, idempotent), and writes the status. It
returns the Events worth telling; the handler layer posts them.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from agent_operator import builders
from agent_operator.config import OperatorSettings
from agent_operator.kube import FIELD_MANAGER, Kube, KubeError
from humanwork_core import tokens
from humanwork_core.resources import (
    AgentInstance,
    AgentInstancePhase,
    AgentInstanceStatus,
    Condition,
    ConditionStatus,
    TokenStatus,
)
from humanwork_core.resources.common import API_VERSION, set_condition
from humanwork_core.signing import derive_secret, generate_secret

GROUP_VERSION = API_VERSION
LONGEST_TOKEN_TTL = timedelta(days=30)
# the EndpointSlices of the `kubernetes` Service in `default`: where the API server is
API_SERVER_SLICES = "kubernetes.io/service-name=kubernetes"


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post about the AgentInstance."""

    reason: str
    message: str
    warning: bool = False


@dataclass
class Keyring:
    """The operator's signing keys: the current one signs, the published ones verify."""

    current: tokens.SigningKey
    published: tuple[tokens.SigningKey, ...]
    callback_key: str = ""
    """The master key the instances' callback secrets are derived from."""


@dataclass
class Outcome:
    """What one reconcile did."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    rotated: bool = False
    provisioned: bool = False


def _now() -> datetime:
    return datetime.now(UTC).replace(microsecond=0)


def _decode(secret: dict[str, Any] | None, key: str) -> str | None:
    if not secret:
        return None
    raw = (secret.get("data") or {}).get(key)
    return base64.b64decode(raw).decode() if raw else None


async def ensure_keyring(kube: Kube, settings: OperatorSettings, now: datetime) -> Keyring:
    """Load the signing keys, generating the first one when there is none, and publish the
    public keys that may still verify a live token as a JWKS ConfigMap."""
    ns, name = settings.platform_namespace, settings.signing_keys_secret
    secret = await kube.get("v1", "Secret", ns, name)
    if secret is None:
        keys = [(tokens.generate_signing_key(), now)]
        try:
            await kube.create(builders.signing_keys_secret(keys, settings))
        except KubeError as exc:
            if exc.status != 409:
                raise
            secret = await kube.get("v1", "Secret", ns, name)  # another replica was first
    if secret is not None:
        keys = builders.read_signing_keys_secret(secret.get("data") or {})
    retention = tokens.key_retention(keys, LONGEST_TOKEN_TTL, now)
    await kube.apply(builders.jwks_config_map(retention.publish, settings))
    return Keyring(
        current=retention.current,
        published=retention.publish,
        callback_key=await ensure_callback_key(kube, settings),
    )


async def ensure_callback_key(kube: Kube, settings: OperatorSettings) -> str:
    """The callback master key, generated once (the first replica to create it wins)."""
    ns, name = settings.platform_namespace, settings.callback_key_secret
    secret = await kube.get("v1", "Secret", ns, name)
    if secret is None:
        try:
            secret = await kube.create(builders.callback_key_secret(generate_secret(), settings))
        except KubeError as exc:
            if exc.status != 409:
                raise
            secret = await kube.get("v1", "Secret", ns, name)  # another replica was first
    key = _decode(secret, builders.CALLBACK_KEY)
    if not key:
        raise KubeError(500, "Invalid", f"Secret {ns}/{name} holds no {builders.CALLBACK_KEY!r}")
    return key


class AppliedCache(dict[tuple[str, str], dict[tuple[str, str], str]]):
    """(namespace, AgentInstance name) -> {(kind, child name): digest of the manifest last
    applied}."""

    def forget(self, namespace: str, owner: str) -> None:
        self.pop((namespace, owner), None)


def manifest_digest(manifest: dict[str, Any]) -> str:
    return hashlib.sha256(
        json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


def foreign_writers(body: dict[str, Any]) -> set[str]:
    """Field managers other than the operator (and, for a Deployment, the controller
    manager, which writes its status and revision) that own fields of a child: a hand edit."""
    allowed = {FIELD_MANAGER}
    if body.get("kind") == "Deployment":
        allowed.add("kube-controller-manager")
    managers = {
        str(entry.get("manager", ""))
        for entry in body.get("metadata", {}).get("managedFields") or []
        if entry.get("subresource") != "status"
    }
    return managers - allowed


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
    """Pure: decide whether the agent's token must be (re)issued."""
    if stored is None:
        return TokenPlan(True, "Issued")
    if builders.REVOKE_TOKEN_ANNOTATION in instance.metadata.annotations:
        return TokenPlan(True, "Revoked")
    published = {k.kid for k in keyring.published}
    if stored.claims.kid not in published:
        return TokenPlan(True, "SigningKeyRetired")
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


def _condition(
    kind: str, ok: bool | None, reason: str, message: str, generation: int | None, now: datetime
) -> Condition:
    status = (
        ConditionStatus.UNKNOWN
        if ok is None
        else (ConditionStatus.TRUE if ok else ConditionStatus.FALSE)
    )
    return Condition(
        type=kind,
        status=status,
        reason=reason,
        message=message,
        last_transition_time=now,
        observed_generation=generation,
    )


def derive_status(
    instance: AgentInstance,
    *,
    token: TokenStatus,
    deployment: dict[str, Any] | None,
    settings: OperatorSettings,
    now: datetime,
) -> AgentInstanceStatus:
    """Pure: the status the operator reports for a provisioned instance."""
    old = instance.status or AgentInstanceStatus()
    gen = instance.metadata.generation
    desired = builders.desired_replicas(instance.spec)
    dep_status = (deployment or {}).get("status") or {}
    replicas = int(dep_status.get("replicas") or 0)
    ready = int(dep_status.get("readyReplicas") or 0)
    config_hash = builders.config_hash(instance.spec)

    if instance.spec.paused:
        phase = AgentInstancePhase.PAUSED
        ready_cond = _condition("Ready", False, "Paused", "spec.paused is true", gen, now)
    elif ready >= desired and desired > 0:
        phase = AgentInstancePhase.READY
        ready_cond = _condition(
            "Ready", True, "AgentsReady", f"{ready}/{desired} agent replicas ready", gen, now
        )
    else:
        phase = AgentInstancePhase.PROVISIONING
        ready_cond = _condition(
            "Ready", False, "AgentsStarting", f"{ready}/{desired} agent replicas ready", gen, now
        )
    valid = now < token.expires_at
    token_cond = _condition(
        "TokenValid",
        valid,
        "TokenIssued" if valid else "TokenExpired",
        f"token {token.jti} (key {token.kid}) expires {token.expires_at.isoformat()}",
        gen,
        now,
    )
    net_cond = _condition(
        "NetworkIsolated",
        True,
        "NetworkPolicyApplied",
        f"NetworkPolicy {builders.agent_name(instance)} allows ingress only from the platform "
        f"API in {settings.platform_namespace} and egress only to DNS, the platform API, the "
        "API server and spec.egress",
        gen,
        now,
    )
    acknowledged = (
        instance.metadata.annotations.get(builders.CONFIG_APPLIED_ANNOTATION) == config_hash
    )
    config_cond = _condition(
        "ConfigApplied",
        True if acknowledged else None,
        "AgentAcknowledged" if acknowledged else "AwaitingAgent",
        f"configuration {config_hash[:12]} published in ConfigMap "
        f"{builders.config_map_name(instance)}"
        + ("" if acknowledged else "; waiting for the agent to acknowledge it"),
        gen,
        now,
    )
    conditions = old.conditions
    for cond in (ready_cond, token_cond, net_cond, config_cond):
        conditions = set_condition(conditions, cond, now=now)
    return AgentInstanceStatus(
        phase=phase,
        replicas=replicas,
        ready_replicas=ready,
        selector=builders.label_selector(instance),
        endpoint=builders.agent_endpoint(instance, settings),
        token=token,
        config_hash=config_hash,
        conditions=conditions,
        observed_generation=gen,
    )


def refused_status(
    instance: AgentInstance, reason: str, message: str, now: datetime
) -> AgentInstanceStatus:
    """Pure: the status of an instance the operator refuses to provision."""
    old = instance.status or AgentInstanceStatus()
    cond = _condition("Ready", False, reason, message, instance.metadata.generation, now)
    return old.model_copy(
        update={
            "phase": AgentInstancePhase.FAILED,
            "conditions": set_condition(old.conditions, cond, now=now),
            "observed_generation": instance.metadata.generation,
        }
    )


def dump_status(status: AgentInstanceStatus) -> dict[str, Any]:
    return status.model_dump(mode="json", by_alias=True, exclude_none=True)


async def reconcile(
    kube: Kube,
    settings: OperatorSettings,
    keyring: Keyring,
    body: dict[str, Any],
    now: datetime | None = None,
    applied: AppliedCache | None = None,
) -> Outcome:
    """Bring one AgentInstance's children and status to what its spec asks for.

    `applied` remembers what was last applied per child; an unchanged child is not applied
    again (the handlers forget an owner's entries when one of its children is deleted or
    edited by someone else, and at each full resync)."""
    now = now or _now()
    applied = applied if applied is not None else AppliedCache()
    instance = AgentInstance.model_validate(body)
    ns = builders.namespace_of(instance)
    name = instance.metadata.name

    namespace = await kube.get("v1", "Namespace", None, ns) or {}
    if (namespace.get("metadata") or {}).get("deletionTimestamp"):
        # the org is going away with everything in it: restoring children would only fail
        return Outcome(dump_status(instance.status or AgentInstanceStatus()))
    ns_labels: dict[str, str] = (namespace.get("metadata") or {}).get("labels") or {}
    refusal = builders.org_mismatch(ns_labels, instance.spec)
    if refusal:
        reason, message = refusal
        status = dump_status(refused_status(instance, reason, message, now))
        await _write_status(kube, ns, name, status)
        return Outcome(status, [Event(reason, message, warning=True)])

    events: list[Event] = []
    missing_psa = builders.missing_pod_security_labels(ns_labels)
    if missing_psa:
        await kube.merge_patch("v1", "Namespace", None, ns, {"metadata": {"labels": missing_psa}})
        events.append(
            Event("NamespaceHardened", f"set {', '.join(sorted(missing_psa))} on namespace {ns}")
        )

    done = applied.setdefault((ns, name), {})
    token_secret = await _read_token_secret(kube, settings, instance, done)
    if token_secret is not None and not builders.owned_by(token_secret, instance):
        # left by a deleted instance of the same name, or planted: never adopt its token
        await _take_over_token_secret(kube, instance, token_secret)
        events.append(
            Event(
                "TokenSecretReplaced",
                f"Secret {builders.token_secret_name(instance)} was not owned by this "
                "AgentInstance; its token is not adopted and a new one is issued",
                warning=True,
            )
        )
        token_secret = None
    stored_raw = _decode(token_secret, "token")
    stored: tokens.MintedToken | None = None
    if stored_raw:
        try:
            stored = tokens.read_minted_token(stored_raw)
        except tokens.TokenError:
            stored = None
    plan = plan_token(instance, stored, keyring, now)
    rotated = False
    if plan.mint:
        minted = tokens.mint_agent_token(
            keyring.current,
            agent_id=builders.agent_id(instance),
            org_id=instance.spec.org_id,
            namespace=ns,
            ttl_seconds=instance.spec.token.ttl_seconds,
            now=now,
            audience=settings.token_audience,
            issuer=settings.token_issuer,
        )
        rotated = stored is not None
        events.append(
            Event(
                "TokenRotated" if rotated else "TokenIssued",
                f"{plan.reason}: token {minted.claims.jti} expires "
                f"{minted.claims.expires_at.isoformat()}",
            )
        )
    else:
        assert stored is not None
        minted = stored

    callback = derive_secret(keyring.callback_key, ns, name, instance.metadata.uid or "")

    provisioned = instance.status is None or instance.status.token is None
    deployment: dict[str, Any] | None = None
    api_server = builders.api_server_endpoints(
        await kube.list("discovery.k8s.io/v1", "EndpointSlice", "default", API_SERVER_SLICES)
    )
    for child in builders.children(instance, settings, minted, callback, api_server):
        key = (child["kind"], child["metadata"]["name"])
        digest = manifest_digest(child)
        if done.get(key) == digest:
            if child["kind"] == "Deployment":
                deployment = await kube.get("apps/v1", "Deployment", ns, key[1])
            continue
        result = await kube.apply(child)
        done[key] = digest
        if child["kind"] == "Deployment":
            deployment = result

    previous = instance.status.token if instance.status else None
    revoking = plan.reason == "Revoked"
    tstatus = token_status(
        instance,
        minted,
        previous,
        rotated,
        now,
        grace_seconds=settings.previous_token_grace_seconds,
        revoked=revoking,
    )
    new_status = derive_status(
        instance, token=tstatus, deployment=deployment, settings=settings, now=now
    )
    old_hash = instance.status.config_hash if instance.status else None
    new_hash = new_status.config_hash or ""
    if old_hash and old_hash != new_hash:
        events.append(Event("ConfigChanged", f"configuration is now {new_hash[:12]}"))
    if provisioned:
        events.append(Event("Provisioned", f"agent {builders.agent_id(instance)} provisioned"))
    status = dump_status(new_status)
    if status != dump_status(instance.status or AgentInstanceStatus()):
        await _write_status(kube, ns, name, status)
    if revoking and previous is not None:
        await record_revocations(kube, settings, revoked_tokens(previous, stored, now))
    done_requests = {
        key: None
        for key in (builders.ROTATE_TOKEN_ANNOTATION, builders.REVOKE_TOKEN_ANNOTATION)
        if key in instance.metadata.annotations
    }
    if done_requests:
        await kube.merge_patch(
            GROUP_VERSION, "AgentInstance", ns, name, {"metadata": {"annotations": done_requests}}
        )
    return Outcome(status, events, rotated=rotated, provisioned=provisioned)


BINDING_WAIT_SECONDS = (0.1, 0.2, 0.4, 0.8, 1.5)
"""Pauses before re-reading a Secret that a RoleBinding just made readable: the API
server's authorizer sees a new RoleBinding within moments, not at once."""


async def _read_token_secret(
    kube: Kube,
    settings: OperatorSettings,
    instance: AgentInstance,
    done: dict[tuple[str, str], str],
) -> dict[str, Any] | None:
    """The instance's token Secret (None when absent), after making sure the operator may
    read it: its ClusterRole holds no verb on Secrets, so in each org namespace it binds
    itself to humanwork-operator-org-secrets first (once per instance until the next
    resync). A 403 right after that binding is retried briefly; any other is raised (the
    handlers retry the reconcile, which re-applies a binding removed by hand)."""
    ns = builders.namespace_of(instance)
    binding = builders.org_secrets_role_binding(ns, settings)
    key = (binding["kind"], binding["metadata"]["name"])
    digest = manifest_digest(binding)
    fresh_binding = done.get(key) != digest
    if fresh_binding:
        await kube.apply(binding)
        done[key] = digest
    name = builders.token_secret_name(instance)
    for pause in (*BINDING_WAIT_SECONDS, None):
        try:
            return await kube.get("v1", "Secret", ns, name)
        except KubeError as exc:
            if exc.status == 403 and not fresh_binding:
                done.pop(key, None)  # the binding was removed: the retry applies it again
            if exc.status != 403 or not fresh_binding or pause is None:
                raise
            await asyncio.sleep(pause)
    return None  # not reached: the last attempt returns or raises


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


async def _take_over_token_secret(
    kube: Kube, instance: AgentInstance, secret: dict[str, Any]
) -> None:
    """Make a token Secret the instance does not own its own and empty it (a merge patch
    replaces the owner list whole and drops every key), so that applying the new token next
    leaves nothing of the old one."""
    data = {key: None for key in (secret.get("data") or {})}
    await kube.merge_patch(
        "v1",
        "Secret",
        builders.namespace_of(instance),
        builders.token_secret_name(instance),
        {"metadata": {"ownerReferences": [builders.owner_reference(instance)]}, "data": data},
    )


async def _write_status(kube: Kube, ns: str, name: str, status: dict[str, Any]) -> None:
    # a merge patch replaces the conditions list whole, which is what the operator wants:
    # it is the only writer of AgentInstance status
    await kube.merge_patch(
        GROUP_VERSION, "AgentInstance", ns, name, {"status": status}, subresource="status"
    )


REVOCATIONS_KEY_PREFIX = "jti."


async def revoke(kube: Kube, settings: OperatorSettings, body: dict[str, Any]) -> list[str]:
    """Record the tokens of a deleted AgentInstance as revoked, in the ConfigMap the platform
    API watches (`<jti>` -> expiry), and drop entries whose tokens have expired anyway."""
    instance = AgentInstance.model_validate(body)
    token = instance.status.token if instance.status else None
    if token is None:
        return []
    revoked = revoked_tokens(token, None, _now())
    await record_revocations(kube, settings, revoked)
    return sorted(revoked)


async def record_revocations(
    kube: Kube, settings: OperatorSettings, revoked: dict[str, datetime]
) -> None:
    """Add `revoked` (jti -> expiry) to the revocation list the platform API reads, and drop
    entries whose tokens have expired anyway."""
    now = _now()
    ns, name = settings.platform_namespace, settings.revocations_config_map
    current = await kube.get("v1", "ConfigMap", ns, name)
    if current is None:
        try:
            current = await kube.create(builders.revocations_config_map(settings))
        except KubeError as exc:
            if exc.status != 409:
                raise
            current = await kube.get("v1", "ConfigMap", ns, name) or {}
    data: dict[str, str | None] = {
        REVOCATIONS_KEY_PREFIX + jti: expires.isoformat() for jti, expires in revoked.items()
    }
    for key, value in ((current or {}).get("data") or {}).items():
        try:
            if datetime.fromisoformat(value) <= now:
                data[key] = None
        except ValueError:
            data[key] = None
    await kube.merge_patch("v1", "ConfigMap", ns, name, {"data": data})
