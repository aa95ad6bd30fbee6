"""Pure: the AgentInstance status the operator reports: phase, replicas, endpoint, token
and the conditions Ready, TokenValid, NetworkIsolated and ConfigApplied."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from agent_operator import builders
from agent_operator.config import OperatorSettings
from humanwork_core.resources import (
    AgentInstance,
    AgentInstancePhase,
    AgentInstanceStatus,
    Condition,
    ConditionStatus,
    TokenStatus,
)
from humanwork_core.resources.common import set_condition


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
    dep_status = (deployment or {}).get("status") or {}
    ready = int(dep_status.get("readyReplicas") or 0)
    config_hash = builders.config_hash(instance.spec)
    phase, ready_cond = _readiness(instance, ready, gen, now)
    conditions = old.conditions
    for cond in (
        ready_cond,
        _token_condition(token, gen, now),
        _network_condition(instance, settings, gen, now),
        _config_condition(instance, config_hash, gen, now),
    ):
        conditions = set_condition(conditions, cond, now=now)
    return AgentInstanceStatus(
        phase=phase,
        replicas=int(dep_status.get("replicas") or 0),
        ready_replicas=ready,
        selector=builders.label_selector(instance),
        endpoint=builders.agent_endpoint(instance, settings),
        token=token,
        config_hash=config_hash,
        conditions=conditions,
        observed_generation=gen,
    )


def readiness_status(
    instance: AgentInstance, deployment: dict[str, Any], now: datetime
) -> AgentInstanceStatus:
    """Pure: the instance's status with only what its Deployment's readiness decides
    brought up to date (phase, replica counts, the Ready condition); the rest (token,
    configuration, the other conditions) as its last full reconcile reported it."""
    old = instance.status or AgentInstanceStatus()
    dep_status = deployment.get("status") or {}
    ready = int(dep_status.get("readyReplicas") or 0)
    phase, ready_cond = _readiness(instance, ready, instance.metadata.generation, now)
    return old.model_copy(
        update={
            "phase": phase,
            "replicas": int(dep_status.get("replicas") or 0),
            "ready_replicas": ready,
            "conditions": set_condition(old.conditions, ready_cond, now=now),
        }
    )


def counts_only(before: dict[str, Any], after: dict[str, Any]) -> bool:
    """Pure: whether two dumped statuses differ in `replicas` (the pods the Deployment
    has) and in nothing else: no change of phase, ready count or condition."""
    if before.get("replicas") == after.get("replicas"):
        return False
    rest = {k: v for k, v in before.items() if k != "replicas"}
    return rest == {k: v for k, v in after.items() if k != "replicas"}


def _readiness(
    instance: AgentInstance, ready: int, gen: int | None, now: datetime
) -> tuple[AgentInstancePhase, Condition]:
    """The phase and the Ready condition: Paused, Ready when every desired replica is, else
    Provisioning."""
    desired = builders.desired_replicas(instance.spec)
    if instance.spec.paused:
        return AgentInstancePhase.PAUSED, _condition(
            "Ready", False, "Paused", "spec.paused is true", gen, now
        )
    counted = f"{ready}/{desired} agent replicas ready"
    if ready >= desired and desired > 0:
        return AgentInstancePhase.READY, _condition("Ready", True, "AgentsReady", counted, gen, now)
    return AgentInstancePhase.PROVISIONING, _condition(
        "Ready", False, "AgentsStarting", counted, gen, now
    )


def _token_condition(token: TokenStatus, gen: int | None, now: datetime) -> Condition:
    """TokenValid: the current token has not expired."""
    valid = now < token.expires_at
    return _condition(
        "TokenValid",
        valid,
        "TokenIssued" if valid else "TokenExpired",
        f"token {token.jti} (key {token.kid}) expires {token.expires_at.isoformat()}",
        gen,
        now,
    )


def _network_condition(
    instance: AgentInstance, settings: OperatorSettings, gen: int | None, now: datetime
) -> Condition:
    """NetworkIsolated: the NetworkPolicy is applied (before any pod)."""
    return _condition(
        "NetworkIsolated",
        True,
        "NetworkPolicyApplied",
        f"NetworkPolicy {builders.agent_name(instance)} allows ingress only from the platform "
        f"API in {settings.platform_namespace} and egress only to DNS, the platform API, the "
        "API server and spec.egress",
        gen,
        now,
    )


def _config_condition(
    instance: AgentInstance, config_hash: str, gen: int | None, now: datetime
) -> Condition:
    """ConfigApplied: True once the agent acknowledged this configuration, else Unknown."""
    acknowledged = (
        instance.metadata.annotations.get(builders.CONFIG_APPLIED_ANNOTATION) == config_hash
    )
    return _condition(
        "ConfigApplied",
        True if acknowledged else None,
        "AgentAcknowledged" if acknowledged else "AwaitingAgent",
        f"configuration {config_hash[:12]} published in ConfigMap "
        f"{builders.config_map_name(instance)}"
        + ("" if acknowledged else "; waiting for the agent to acknowledge it"),
        gen,
        now,
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
