"""`kubectl humanwork receipt verify FILE --keys KEYSET`: check a tool-call receipt offline.

A receipt (`humanwork.io/tool-receipt/v1`, what the tool proxy returns and
`GET /agentic/tasks/{namespace}/{name}/receipts` lists) is signed by the platform with
Ed25519 over the canonical JSON (sorted keys, no whitespace, UTF-8) of every field but
`signature`. KEYSET is the JWK set of `GET /v1/receipt-keys` saved to a file (retired keys
included, so old receipts still verify). Nothing here talks to the network: the check is
the plugin's own (the plugin imports no platform code), the same as the platform's.

FILE may hold one receipt, a list of them, or the `{"items": [...]}` answer of the task's
receipts; every receipt must verify. Exit 0 when all do, 7 when one does not (its reason
printed: `receipt_malformed`, `receipt_unknown_key`, `receipt_signature_mismatch`), 2 for
an unreadable FILE or KEYSET.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import json
from pathlib import Path
from typing import Any, TextIO

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from kubectl_humanwork.client import PluginError

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
"""Fields a receipt may lack (receipts signed before the field was added)."""
NOT_VERIFIED = 7
MAX_FILE_BYTES = 4 * 1024 * 1024


class Unreadable(PluginError):
    exit_code = 2


class Refused(Exception):
    """A receipt that does not verify, with the reason's code."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _b64url_decode(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _load_json(path: str, what: str) -> Any:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise Unreadable(f"cannot read the {what} {path}: {exc.strerror}") from None
    if len(data) > MAX_FILE_BYTES:
        raise Unreadable(f"the {what} {path} is larger than {MAX_FILE_BYTES} bytes")
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise Unreadable(f"the {what} {path} is not JSON: {exc}") from None


def load_keys(path: str) -> dict[str, Ed25519PublicKey]:
    """The Ed25519 keys of a JWK set file, by kid."""
    document = _load_json(path, "key set")
    entries = document.get("keys") if isinstance(document, dict) else None
    if not isinstance(entries, list):
        raise Unreadable(f"the key set {path} has no `keys` list")
    keys: dict[str, Ed25519PublicKey] = {}
    for entry in entries:
        if not isinstance(entry, dict) or entry.get("kty") != "OKP":
            continue
        if entry.get("crv") != "Ed25519" or not isinstance(entry.get("kid"), str):
            continue
        try:
            keys[entry["kid"]] = Ed25519PublicKey.from_public_bytes(_b64url_decode(entry["x"]))
        except (KeyError, TypeError, ValueError, binascii.Error):
            raise Unreadable(f"the key set {path} holds a broken Ed25519 key") from None
    return keys


def canonical_json(value: Any) -> bytes:
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def verify(receipt: Any, keys: dict[str, Ed25519PublicKey]) -> dict[str, Any]:
    """The receipt if a key of `keys` signed exactly it; Refused otherwise."""
    if (
        not isinstance(receipt, dict)
        or not FIELDS <= set(receipt) <= FIELDS | OPTIONAL_FIELDS
        or receipt["type"] != TYPE
    ):
        raise Refused("receipt_malformed", f"not a {TYPE} document")
    kid, signature = receipt["kid"], receipt["signature"]
    if not isinstance(kid, str) or not isinstance(signature, str):
        raise Refused("receipt_malformed", "kid and signature must be strings")
    key = keys.get(kid)
    if key is None:
        raise Refused("receipt_unknown_key", f"signed by key {kid[:60]!r}, not in the key set")
    body = {name: value for name, value in receipt.items() if name != "signature"}
    try:
        key.verify(_b64url_decode(signature), canonical_json(body))
    except (InvalidSignature, ValueError, binascii.Error):
        raise Refused("receipt_signature_mismatch", "the signature does not match") from None
    return receipt


def _receipts_in(document: Any) -> list[Any]:
    if isinstance(document, dict) and set(document) == {"items"}:
        document = document["items"]
    items = document if isinstance(document, list) else [document]
    if not items:
        raise Unreadable("the file holds no receipt")
    return items


def cmd_verify(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Verify every receipt of FILE against KEYSET (see the module docstring)."""
    keys = load_keys(args.keys)
    failed = 0
    for index, item in enumerate(_receipts_in(_load_json(args.file, "receipt file"))):
        try:
            receipt = verify(item, keys)
        except Refused as refused:
            failed += 1
            err.write(f"receipt {index}: NOT VERIFIED {refused.code}: {refused.message}\n")
            continue
        task = receipt["task"] or {}
        where = f"{task.get('namespace')}/{task.get('name')}" if task else "(no task)"
        approvers = ",".join(str(a.get("by")) for a in receipt["approvals"] or []) or "-"
        out.write(
            f"receipt {index}: verified {where} step={receipt['step']} "
            f"{receipt['tool']}.{receipt['action']} approved-by={approvers} "
            f"at={receipt['at']} kid={receipt['kid']}\n"
        )
    return NOT_VERIFIED if failed else 0


def add_commands(sub: Any) -> None:
    """`receipt verify FILE --keys KEYSET` (offline: needs no URL or token)."""
    receipt = sub.add_parser("receipt", help="check a signed tool-call receipt offline")
    actions = receipt.add_subparsers(dest="receipt_command", required=True, metavar="ACTION")
    check = actions.add_parser("verify", help="verify receipts against a published key set")
    check.add_argument("file", metavar="FILE", help="a receipt, a list, or a task's receipts")
    check.add_argument(
        "--keys", required=True, metavar="KEYSET", help="the JWK set of GET /v1/receipt-keys"
    )
    check.set_defaults(run=None, offline=cmd_verify)
