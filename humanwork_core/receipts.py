"""Signed receipts of the tool proxy's side effects: what ran, on whose word, and what came back.

A receipt is the platform's statement "for step S of task T (uid U), tool X action A ran
with parameters whose digest is C, approved by these experts at these times, confirmed by
this client at this time, under the policy whose digest is P; the upstream answered with
a result whose digest is R, at time W". It is signed with an Ed25519 key
(`humanwork_core.tokens.SigningKey`) that no database role holds, so whoever owns the
database can neither forge one nor change one; anyone holding the published key set
(JWKS) checks one offline (`kubectl humanwork receipt verify`).

The signature covers the canonical JSON (`canonical_json`: sorted keys, no whitespace,
UTF-8) of every field but `signature`, `type` naming this format and `kid` the key, so a
changed byte anywhere fails it. Keys rotate: a retired key stays in the verification set
and its receipts still verify; a key id the set does not hold fails (`receipt_unknown_key`).

Digests are `sha256:<hex>` of canonical JSON: `call_digest` of `{tool, action, params}`
(the parameters that ran, edits included), `answer_digest` of the result the agent was
given (the agent recomputes it from the answer it holds), or for an upstream that answered
with an error, of what the platform made of that answer (the proxy's error body).
`answerStatus` is the HTTP status of the upstream's last answer (a 4xx or 5xx included:
every call the upstream answered gets a receipt, a call refused before it reached the
upstream gets none); it is optional in the format, so receipts signed before it was added
still verify. Everything here is pure: the clock is passed in, nothing is read from the
environment.

Refusals raise a `ReceiptError` subclass with a stable `code`: `receipt_malformed`,
`receipt_unknown_key`, `receipt_signature_mismatch`.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, ClassVar

from cryptography.exceptions import InvalidSignature

from .errors import HumanworkError
from .resources import AgenticTask
from .resources.tasktypes import ConfirmationState
from .tokens import KeySet, SigningKey

TYPE = "humanwork.io/tool-receipt/v1"
FIELDS = frozenset(
    {
        "type",
        "org",
        "agent",
        "task",
        "step",
        "tool",
        "action",
        "callDigest",
        "approvals",
        "confirmation",
        "policyVersion",
        "answerDigest",
        "at",
        "kid",
        "signature",
    }
)
OPTIONAL_FIELDS = frozenset({"answerStatus"})
"""Fields a receipt may lack (those signed before the field was added)."""
MAX_RECEIPT_BYTES = 64 * 1024


class ReceiptError(HumanworkError):
    """A receipt was refused; the subclass's `code` says why."""

    code: ClassVar[str] = "receipt_invalid"


class ReceiptMalformed(ReceiptError):
    code: ClassVar[str] = "receipt_malformed"


class ReceiptUnknownKey(ReceiptError):
    code: ClassVar[str] = "receipt_unknown_key"


class ReceiptSignatureMismatch(ReceiptError):
    code: ClassVar[str] = "receipt_signature_mismatch"


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes of `value` (what is signed and what is digested)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def digest(value: Any) -> str:
    """`sha256:<hex>` of the canonical JSON of `value`."""
    return "sha256:" + hashlib.sha256(canonical_json(value)).hexdigest()


def call_digest(tool: str, action: str, params: Mapping[str, Any]) -> str:
    """The digest of one call: the tool, the action and the parameters that ran."""
    return digest({"tool": tool, "action": action, "params": dict(params)})


def timestamp(at: datetime) -> str:
    """RFC 3339 UTC with microseconds, the one spelling of a time in a receipt."""
    if at.tzinfo is None:
        raise ValueError("receipt times must be timezone-aware")
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class Signoff:
    """One human's word on the step: who, when (and for a decision, the verdict)."""

    by: str
    at: str
    verdict: str | None = None

    def document(self) -> dict[str, str]:
        doc = {"by": self.by, "at": self.at}
        return doc if self.verdict is None else {**doc, "verdict": self.verdict}


@dataclass(frozen=True)
class TaskRef:
    """The task a receipt belongs to: its namespace, name and uid (never reused)."""

    namespace: str
    name: str
    uid: str


@dataclass(frozen=True)
class Facts:
    """Everything a receipt states, before it is signed."""

    org: str
    agent: str
    task: TaskRef | None
    step: str | None
    tool: str
    action: str
    params: Mapping[str, Any]
    approvals: Sequence[Signoff]
    confirmation: Signoff | None
    policy_version: str
    answer: Mapping[str, Any]
    at: datetime
    answer_status: int | None = None
    """The HTTP status of the upstream's last answer (None: not known)."""


def unsigned(facts: Facts, kid: str) -> dict[str, Any]:
    """The signed part of a receipt of `facts`, to be signed with key `kid`."""
    task = facts.task
    return {
        "type": TYPE,
        "org": facts.org,
        "agent": facts.agent,
        "task": (
            None
            if task is None
            else {"namespace": task.namespace, "name": task.name, "uid": task.uid}
        ),
        "step": facts.step,
        "tool": facts.tool,
        "action": facts.action,
        "callDigest": call_digest(facts.tool, facts.action, facts.params),
        "approvals": [approval.document() for approval in facts.approvals],
        "confirmation": None if facts.confirmation is None else facts.confirmation.document(),
        "policyVersion": facts.policy_version,
        "answerDigest": digest(dict(facts.answer)),
        "answerStatus": facts.answer_status,
        "at": timestamp(facts.at),
        "kid": kid,
    }


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def sign(key: SigningKey, facts: Facts) -> dict[str, Any]:
    """The receipt of `facts`, signed with `key`: a JSON-ready document."""
    body = unsigned(facts, key.kid)
    return {**body, "signature": _b64url(key.private_key.sign(canonical_json(body)))}


def _check_shape(document: Any) -> Mapping[str, Any]:
    if not isinstance(document, Mapping) or not FIELDS <= set(document) <= FIELDS | OPTIONAL_FIELDS:
        raise ReceiptMalformed(f"not a {TYPE} document: it needs exactly the fields of one")
    if document["type"] != TYPE:
        raise ReceiptMalformed(f"not a {TYPE} document", type=str(document["type"])[:100])
    for name in ("kid", "signature", "callDigest", "answerDigest", "at", "tool", "action"):
        if not isinstance(document[name], str):
            raise ReceiptMalformed(f"field {name} must be a string", field=name)
    status = document.get("answerStatus")
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
        raise ReceiptMalformed("field answerStatus must be an integer or null")
    return document


def verify(document: Any, keys: KeySet) -> Mapping[str, Any]:
    """Check a receipt against the verification keys; return it, or raise a ReceiptError
    (`receipt_malformed`, `receipt_unknown_key`, `receipt_signature_mismatch`)."""
    receipt = _check_shape(document)
    public_key = keys.get(receipt["kid"])
    if public_key is None:
        raise ReceiptUnknownKey(
            "the receipt is signed by a key the key set does not hold", kid=receipt["kid"][:100]
        )
    body = {name: value for name, value in receipt.items() if name != "signature"}
    text = receipt["signature"]
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        public_key.verify(raw, canonical_json(body))
    except (InvalidSignature, binascii.Error, ValueError):
        raise ReceiptSignatureMismatch("the signature does not match the receipt") from None
    return receipt


def parse(data: bytes) -> Any:
    """The JSON document in `data` (a receipt file), or ReceiptMalformed."""
    if len(data) > MAX_RECEIPT_BYTES:
        raise ReceiptMalformed(f"a receipt is at most {MAX_RECEIPT_BYTES} bytes")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReceiptMalformed(f"not JSON: {exc}") from None


def signoffs(task: AgenticTask, step_id: str) -> tuple[list[Signoff], Signoff | None]:
    """Who approved the step and when (every approval of a quorum, else the decision), and
    the initiating client's confirmation when the status records one."""
    entry = task.current_status().step(step_id)
    decisions = list(entry.approvals) or ([entry.decision] if entry.decision else [])
    approvals = [Signoff(d.by, timestamp(d.at), d.verdict.value) for d in decisions]
    confirmed = entry.confirmation
    if (
        confirmed is None
        or confirmed.state != ConfirmationState.CONFIRMED
        or confirmed.by is None
        or confirmed.at is None
    ):
        return approvals, None
    return approvals, Signoff(confirmed.by, timestamp(confirmed.at))


def task_ref(task: AgenticTask) -> TaskRef:
    """The task's namespace, name and uid (its name where the API server gave no uid)."""
    meta = task.metadata
    return TaskRef(meta.namespace or "", meta.name, meta.uid or meta.name)


def ledger_key(task_uid: str, step_id: str) -> str:
    """The tool-call ledger's key of an approved step's side effect (and the upstream's
    `Idempotency-Key`): where the step's receipt is kept."""
    return f"step:{task_uid}/{step_id}"


def policy_version(task_policy: Any, org_policy: Any, client_confirm_risks: Any) -> str:
    """The digest of the rules the call was judged by: the task's approval policy, the
    org's, and the risks the org's clients confirm."""
    return digest(
        {"task": task_policy, "org": org_policy, "clientConfirmRisks": client_confirm_risks}
    )
