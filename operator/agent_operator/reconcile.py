"""Reconcile one AgentInstance: the steps between the kopf handlers and the pure builders.

`reconcile` runs named steps (:class:`InstanceReconcile`): check the org namespace (refuse
a namespace of another org, add the Pod Security labels it lacks), read the stored token
(never adopting a Secret the instance does not own), plan and mint the token
(:func:`~agent_operator.token_plan.plan_token`), apply the children the builders describe
(server-side apply, idempotent, unchanged ones skipped), report the status
(:func:`~agent_operator.instance_status.derive_status`) and finish the rotation and
revocation requests. It returns the Events worth telling; the handler layer posts them.

The pure decisions live in :mod:`agent_operator.token_plan` and
:mod:`agent_operator.instance_status`, the key material and revocations in
:mod:`agent_operator.keyring`; their names are re-exported here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agent_operator import builders, faultpoints
from agent_operator.config import OperatorSettings
from agent_operator.instance_status import (
    derive_status,
    dump_status,
    refused_status,
)
from agent_operator.keyring import (
    REVOCATIONS_KEY_PREFIX,
    _decode,
    _now,
    ensure_callback_key,
    ensure_keyring,
    record_revocations,
    revoke,
)
from agent_operator.kube import FIELD_MANAGER, Kube, KubeError
from agent_operator.token_plan import (
    LONGEST_TOKEN_TTL,
    Keyring,
    TokenPlan,
    plan_token,
    revoked_tokens,
    seconds_until_rotation,
    token_status,
)
from humanwork_core import tokens
from humanwork_core.resources import AgentInstance, AgentInstanceStatus
from humanwork_core.resources.common import API_VERSION
from humanwork_core.signing import derive_secret

__all__ = [
    "API_SERVER_SLICES",
    "BINDING_WAIT_SECONDS",
    "GROUP_VERSION",
    "LONGEST_TOKEN_TTL",
    "REVOCATIONS_KEY_PREFIX",
    "ApiServerEndpoints",
    "AppliedCache",
    "Event",
    "InstanceReconcile",
    "Keyring",
    "Outcome",
    "TokenPlan",
    "derive_status",
    "dump_status",
    "ensure_callback_key",
    "ensure_keyring",
    "foreign_writers",
    "manifest_digest",
    "plan_token",
    "reconcile",
    "record_revocations",
    "refused_status",
    "revoke",
    "revoked_tokens",
    "seconds_until_rotation",
    "split_deployment",
    "token_status",
    "write_status",
]


GROUP_VERSION = API_VERSION


# the EndpointSlices of the `kubernetes` Service in `default`: where the API server is
API_SERVER_SLICES = "kubernetes.io/service-name=kubernetes"


def split_deployment(
    children: list[dict[str, Any]],
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The children but the Deployment, in their order, and the Deployment (picked by its
    kind, wherever the builders put it); a clear error when there is not exactly one."""
    deployments = [child for child in children if child["kind"] == "Deployment"]
    if len(deployments) != 1:
        kinds = [child["kind"] for child in children]
        raise ValueError(f"expected one Deployment among the children, got {kinds}")
    return [child for child in children if child["kind"] != "Deployment"], deployments[0]


@dataclass(frozen=True)
class Event:
    """A Kubernetes Event to post about the AgentInstance."""

    reason: str
    message: str
    warning: bool = False
    token: str = ""
    """TokenIssued or TokenRotated when the Event tells of a token minted (the metrics)."""


@dataclass
class Outcome:
    """What one reconcile did."""

    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)
    rotated: bool = False
    provisioned: bool = False


class AppliedCache(dict[tuple[str, str], dict[tuple[str, str], str]]):
    """(namespace, AgentInstance name) -> {(kind, child name): digest of the manifest last
    applied}."""

    def forget(self, namespace: str, owner: str) -> None:
        self.pop((namespace, owner), None)


class ApiServerEndpoints:
    """Where the API server is (the EndpointSlices of the `kubernetes` Service, which every
    agent's NetworkPolicy lets it reach), read at most once every `ttl` seconds: it seldom
    moves, and a burst of orgs read it once per org."""

    def __init__(self, ttl: float = 30.0) -> None:
        self.ttl = ttl
        self._read_at: float | None = None
        self._endpoints: list[builders.ApiServerEndpoint] = []
        self._lock = asyncio.Lock()  # concurrent reconciles wait for one read

    async def get(self, kube: Kube) -> list[builders.ApiServerEndpoint]:
        async with self._lock:
            if self._read_at is None or time.monotonic() - self._read_at >= self.ttl:
                slices = await kube.list(
                    "discovery.k8s.io/v1", "EndpointSlice", "default", API_SERVER_SLICES
                )
                self._endpoints = builders.api_server_endpoints(slices)
                self._read_at = time.monotonic()
            return self._endpoints


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


async def reconcile(
    kube: Kube,
    settings: OperatorSettings,
    keyring: Keyring,
    body: dict[str, Any],
    now: datetime | None = None,
    applied: AppliedCache | None = None,
    endpoints: ApiServerEndpoints | None = None,
    namespace_labels: dict[str, dict[str, str]] | None = None,
) -> Outcome:
    """Bring one AgentInstance's children and status to what its spec asks for.

    `applied` remembers what was last applied per child; an unchanged child is not applied
    again (the handlers forget an owner's entries when one of its children is deleted or
    edited by someone else, and at each full resync); `endpoints` keeps where the API server
    is between reconciles; `namespace_labels` holds the labels of the org namespaces as the
    namespace watch last told them (a namespace missing from it is read)."""
    instance = AgentInstance.model_validate(body)
    applied = applied if applied is not None else AppliedCache()
    done = applied.setdefault((builders.namespace_of(instance), instance.metadata.name), {})
    step = InstanceReconcile(
        kube,
        settings,
        keyring,
        instance,
        now or _now(),
        done,
        endpoints or ApiServerEndpoints(0),
        namespace_labels if namespace_labels is not None else {},
    )
    return await step.run()


@dataclass
class Minted:
    """The token the agent is to hold, and how it came to be."""

    plan: TokenPlan
    token: tokens.MintedToken
    stored: tokens.MintedToken | None
    rotated: bool


@dataclass
class InstanceReconcile:
    """One reconcile of one AgentInstance, in named steps, its dependencies held once."""

    kube: Kube
    settings: OperatorSettings
    keyring: Keyring
    instance: AgentInstance
    now: datetime
    done: dict[tuple[str, str], str]
    """(kind, child name) -> digest of the manifest last applied (this owner's cache)."""
    endpoints: ApiServerEndpoints
    namespace_labels: dict[str, dict[str, str]]
    """Org namespace -> its labels, from the namespace watch (kept up to date here too)."""
    events: list[Event] = field(default_factory=list)

    @property
    def ns(self) -> str:
        return builders.namespace_of(self.instance)

    @property
    def name(self) -> str:
        return self.instance.metadata.name

    @property
    def provisioning(self) -> bool:
        """Whether no token was reported yet: this reconcile provisions the agent."""
        return self.instance.status is None or self.instance.status.token is None

    async def run(self) -> Outcome:
        """The steps, in order; a namespace that is going away or of another org ends early."""
        early = await self.check_namespace()
        if early is not None:
            return early
        minted = await self.token(await self.stored_token())
        provisioned = self.provisioning
        deployment = await self.apply_children(minted.token)
        status = await self.report(minted, deployment, provisioned)
        await self.finish_requests(minted)
        return Outcome(status, self.events, rotated=minted.rotated, provisioned=provisioned)

    async def check_namespace(self) -> Outcome | None:
        """The org namespace: None to go on (after adding the `restricted` Pod Security
        labels it lacks); the outcome when it is terminating or refuses the instance."""
        instance, ns = self.instance, self.ns
        ns_labels = self.namespace_labels.get(ns)
        if ns_labels is None:  # not seen by the watch (or terminating): read it
            namespace = await self.kube.get("v1", "Namespace", None, ns) or {}
            if (namespace.get("metadata") or {}).get("deletionTimestamp"):
                # the org is going away with everything in it: restoring children would fail
                return Outcome(dump_status(instance.status or AgentInstanceStatus()))
            ns_labels = (namespace.get("metadata") or {}).get("labels") or {}
        refusal = builders.org_mismatch(ns_labels, instance.spec)
        if refusal:
            reason, message = refusal
            status = dump_status(refused_status(instance, reason, message, self.now))
            await write_status(self.kube, ns, self.name, status)
            return Outcome(status, [Event(reason, message, warning=True)])
        missing_psa = builders.missing_pod_security_labels(ns_labels)
        if missing_psa:
            patch = {"metadata": {"labels": missing_psa}}
            await self.kube.merge_patch("v1", "Namespace", None, ns, patch, answer=False)
            if ns in self.namespace_labels:
                self.namespace_labels[ns] = {**ns_labels, **missing_psa}
            self.events.append(
                Event(
                    "NamespaceHardened", f"set {', '.join(sorted(missing_psa))} on namespace {ns}"
                )
            )
        return None

    async def stored_token(self) -> tokens.MintedToken | None:
        """The token in the instance's Secret, if it owns the Secret and the token reads."""
        instance = self.instance
        secret = await _read_token_secret(self.kube, self.settings, instance, self.done)
        if secret is not None and not builders.owned_by(secret, instance):
            # left by a deleted instance of the same name, or planted: never adopt its token
            await _take_over_token_secret(self.kube, instance, secret)
            self.events.append(
                Event(
                    "TokenSecretReplaced",
                    f"Secret {builders.token_secret_name(instance)} was not owned by this "
                    "AgentInstance; its token is not adopted and a new one is issued",
                    warning=True,
                )
            )
            secret = None
        raw = _decode(secret, "token")
        if not raw:
            return None
        try:
            return tokens.read_minted_token(raw)
        except tokens.TokenError:
            return None

    async def token(self, stored: tokens.MintedToken | None) -> Minted:
        """Keep the stored token or mint a new one (see :func:`plan_token`)."""
        instance = self.instance
        plan = plan_token(instance, stored, self.keyring, self.now)
        if not plan.mint:
            assert stored is not None
            recovered = plan.reason == "RotationRecovered"
            if recovered:
                self.events.append(
                    Event(
                        "TokenRotated",
                        f"{plan.reason}: token {stored.claims.jti}, written before a reconcile "
                        "that did not finish, is adopted",
                    )
                )
            return Minted(plan, stored, stored, rotated=recovered)
        minted = tokens.mint_agent_token(
            self.keyring.current,
            agent_id=builders.agent_id(instance),
            org_id=instance.spec.org_id,
            namespace=self.ns,
            ttl_seconds=instance.spec.token.ttl_seconds,
            now=self.now,
            audience=self.settings.token_audience,
            issuer=self.settings.token_issuer,
        )
        rotated = stored is not None
        kind = "TokenRotated" if rotated else "TokenIssued"
        told = (
            f"{plan.reason}: token {minted.claims.jti} expires "
            f"{minted.claims.expires_at.isoformat()}"
        )
        if self.provisioning and not rotated:
            # one Event for an org's first provisioning, naming its first token
            told = f"agent {builders.agent_id(instance)} provisioned; {told}"
            self.events.append(Event("Provisioned", told, token=kind))
        else:
            self.events.append(Event(kind, told, token=kind))
        return Minted(plan, minted, stored, rotated=rotated)

    async def apply_children(self, minted: tokens.MintedToken) -> dict[str, Any] | None:
        """Apply every child whose manifest changed since it was last applied, in three
        rounds, each child of a round at once: every child but the RoleBinding and the
        Deployment (none of them starts a pod or needs another); the RoleBinding (the API
        server lets the operator bind only a Role that exists, whose permissions it
        holds); the Deployment, so the NetworkPolicy, the token and the rest are in place
        before any pod. The Deployment as the API server has it (for the status)."""
        instance, ns, kube = self.instance, self.ns, self.kube
        callback = derive_secret(
            self.keyring.callback_key, ns, self.name, instance.metadata.uid or ""
        )
        api_server = await self.endpoints.get(kube)
        trust = read_platform_ca(self.settings)
        first, last = split_deployment(
            builders.children(
                instance, self.settings, minted, callback, api_server, platform_ca=trust
            )
        )
        bindings = [child for child in first if child["kind"] == "RoleBinding"]
        for batch in ([child for child in first if child not in bindings], bindings):
            # their answers are not read: not decoded (each holds its managed fields)
            await asyncio.gather(*(self._apply(child, answer=False) for child in batch))
        applied = await self._apply(last)
        if applied is None:  # unchanged: as it is now, for its readiness
            return await kube.get("apps/v1", "Deployment", ns, last["metadata"]["name"])
        return applied

    async def _apply(self, child: dict[str, Any], *, answer: bool = True) -> dict[str, Any] | None:
        """Apply one child unless its manifest is the one last applied (None); the object
        as applied (`{}` when no `answer` is wanted)."""
        key = (child["kind"], child["metadata"]["name"])
        digest = manifest_digest(child)
        if self.done.get(key) == digest:
            return None
        result = await self.kube.apply(child, answer=answer)
        self.done[key] = digest
        return result

    async def report(
        self, minted: Minted, deployment: dict[str, Any] | None, provisioned: bool
    ) -> dict[str, Any]:
        """Derive the status, tell what changed, and write it when it differs."""
        instance = self.instance
        tstatus = token_status(
            instance,
            minted.token,
            instance.status.token if instance.status else None,
            minted.rotated,
            self.now,
            grace_seconds=self.settings.previous_token_grace_seconds,
            revoked=minted.plan.reason == "Revoked",
        )
        new_status = derive_status(
            instance, token=tstatus, deployment=deployment, settings=self.settings, now=self.now
        )
        old_hash = instance.status.config_hash if instance.status else None
        new_hash = new_status.config_hash or ""
        if old_hash and old_hash != new_hash:
            self.events.append(Event("ConfigChanged", f"configuration is now {new_hash[:12]}"))
        if provisioned and all(event.reason != "Provisioned" for event in self.events):
            # (a stored token adopted: no token Event told of the provisioning)
            self.events.append(
                Event("Provisioned", f"agent {builders.agent_id(instance)} provisioned")
            )
        status = dump_status(new_status)
        if minted.token is not minted.stored:  # a token minted by this reconcile
            point = "rotation" if minted.rotated else "provision"
            faultpoints.reach(f"{point}.before_status_write")
        if status != dump_status(instance.status or AgentInstanceStatus()):
            await write_status(self.kube, self.ns, self.name, status)
        return status

    async def finish_requests(self, minted: Minted) -> None:
        """Record a revocation's ended tokens, then remove the rotation and revocation
        annotations the reconcile has honoured."""
        instance = self.instance
        previous = instance.status.token if instance.status else None
        if minted.plan.reason == "Revoked" and previous is not None:
            ended = revoked_tokens(previous, minted.stored, self.now)
            await record_revocations(self.kube, self.settings, ended)
        done_requests = {
            key: None
            for key in (builders.ROTATE_TOKEN_ANNOTATION, builders.REVOKE_TOKEN_ANNOTATION)
            if key in instance.metadata.annotations
        }
        if done_requests:
            await self.kube.merge_patch(
                GROUP_VERSION,
                "AgentInstance",
                self.ns,
                self.name,
                {"metadata": {"annotations": done_requests}},
                answer=False,
            )


BINDING_WAIT_SECONDS = (0.1, 0.2, 0.4, 0.8, 1.5)
"""Pauses before re-reading a Secret that a RoleBinding just made readable: the API
server's authorizer sees a new RoleBinding within moments, not at once."""


def read_platform_ca(settings: OperatorSettings) -> str | None:
    """The CA bundle the agents are to trust, as its file holds it now (None when the
    setting is empty); an unreadable or empty file fails the reconcile rather than leave
    agents without the CA."""
    if not settings.platform_ca_file:
        return None
    try:
        bundle = Path(settings.platform_ca_file).read_text(encoding="utf-8")
    except OSError as exc:
        raise KubeError(0, "PlatformCAUnreadable", f"{settings.platform_ca_file}: {exc}") from exc
    if "BEGIN CERTIFICATE" not in bundle:
        raise KubeError(0, "PlatformCAUnreadable", f"{settings.platform_ca_file}: no certificate")
    return bundle


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
        await kube.apply(binding, answer=False)
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
        answer=False,
    )


async def write_status(kube: Kube, ns: str, name: str, status: dict[str, Any]) -> None:
    # a merge patch replaces the conditions list whole, which is what the operator wants:
    # it is the only writer of AgentInstance status; its answer (the whole instance) is
    # not read
    await kube.merge_patch(
        GROUP_VERSION,
        "AgentInstance",
        ns,
        name,
        {"status": status},
        subresource="status",
        answer=False,
    )
