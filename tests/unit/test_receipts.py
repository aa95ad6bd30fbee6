"""The signed receipts of the tool proxy's side effects (`humanwork_core.receipts`): a
receipt verifies against the key that signed it, a retired key still verifies its old
receipts, and any changed byte, an unknown key or a malformed document fails with its code."""

from __future__ import annotations

import io
import json
from datetime import timedelta
from pathlib import Path

import pytest

from humanwork_core import receipts
from humanwork_core.resources import AgenticTaskStatus, Risk
from humanwork_core.resources.taskstatus import Confirmation, Decision, StepStatus
from humanwork_core.tokens import KeySet, generate_signing_key, jwks
from kubectl_humanwork import main as plugin
from tests.unit.factories import T0, action, make_task

PARAMS = {"inventory_item_id": 7, "available_adjustment": -3}
ANSWER = {"inventory_level": {"available": 4}}


def test_a_receipt_states_the_upstreams_answer_status_and_a_bad_one_is_malformed() -> None:
    key = generate_signing_key()
    keys = KeySet({key.kid: key.public_key})
    refused = receipts.sign(key, facts(answer={"code": "upstream_error"}, answer_status=422))
    assert receipts.verify(refused, keys)["answerStatus"] == 422
    assert refused["answerDigest"] == receipts.digest({"code": "upstream_error"})
    for bad in ("422", True, 4.5):
        with pytest.raises(receipts.ReceiptMalformed):
            receipts.verify({**refused, "answerStatus": bad}, keys)


def test_a_receipt_signed_before_answer_status_existed_still_verifies(tmp_path: Path) -> None:
    """The older format (no `answerStatus`) verifies on the platform and in the plugin;
    removing the field from a newer receipt does not (its signature covers it)."""
    key = generate_signing_key()
    body = {k: v for k, v in receipts.unsigned(facts(), key.kid).items() if k != "answerStatus"}
    signature = key.private_key.sign(receipts.canonical_json(body))
    old = {**body, "signature": receipts._b64url(signature)}
    keys = KeySet({key.kid: key.public_key})
    assert "answerStatus" not in receipts.verify(old, keys)
    assert verify_files(tmp_path, old, jwks([key]))[0] == 0
    newer = receipts.sign(key, facts(answer_status=200))
    stripped = {k: v for k, v in newer.items() if k != "answerStatus"}
    with pytest.raises(receipts.ReceiptSignatureMismatch):
        receipts.verify(stripped, keys)
    assert verify_files(tmp_path, stripped, jwks([key]))[0] == 7


def facts(**changes: object) -> receipts.Facts:
    values: dict[str, object] = {
        "org": "org-1",
        "agent": "org-acme/agent",
        "task": receipts.TaskRef("org-acme", "task", "uid-1"),
        "step": "fix",
        "tool": "shopify",
        "action": "adjustInventoryLevel",
        "params": PARAMS,
        "approvals": [receipts.Signoff("expert-1", "2026-11-02T09:00:00.000000Z", "approve")],
        "confirmation": receipts.Signoff("client-1", "2026-11-02T08:59:00.000000Z"),
        "policy_version": receipts.policy_version({"quorum": 1}, None, ["high"]),
        "answer": ANSWER,
        "at": T0,
    }
    values.update(changes)
    return receipts.Facts(**values)  # type: ignore[arg-type]


def test_a_receipt_verifies_against_its_key_and_states_the_call() -> None:
    key = generate_signing_key()
    receipt = receipts.sign(key, facts())
    checked = receipts.verify(json.loads(json.dumps(receipt)), KeySet({key.kid: key.public_key}))
    assert checked["task"] == {"namespace": "org-acme", "name": "task", "uid": "uid-1"}
    assert checked["callDigest"] == receipts.call_digest("shopify", "adjustInventoryLevel", PARAMS)
    assert checked["answerDigest"] == receipts.digest(ANSWER)
    assert checked["approvals"][0]["by"] == "expert-1"
    assert checked["confirmation"]["by"] == "client-1"
    assert checked["at"] == "2026-11-02T09:00:00.000000Z" and checked["kid"] == key.kid


def test_every_changed_byte_of_the_signed_part_fails() -> None:
    key = generate_signing_key()
    keys = KeySet({key.kid: key.public_key})
    text = json.dumps(receipts.sign(key, facts()), sort_keys=True)
    start = text.index('"action"')
    end = text.index('"signature"')
    failures = 0
    for i in range(start, end):
        changed = text[:i] + chr(ord(text[i]) ^ 1) + text[i + 1 :]
        with pytest.raises(receipts.ReceiptError) as refused:
            receipts.verify(receipts.parse(changed.encode()), keys)
        failures += 1
        assert refused.value.code in {
            "receipt_malformed",
            "receipt_unknown_key",
            "receipt_signature_mismatch",
        }
    assert failures == end - start > 300
    receipts.verify(receipts.parse(text.encode()), keys)  # the positive control
    # the signature itself: one character changed
    receipt = receipts.sign(key, facts())
    sig = receipt["signature"]
    receipt["signature"] = ("B" if sig[0] == "A" else "A") + sig[1:]
    with pytest.raises(receipts.ReceiptSignatureMismatch):
        receipts.verify(receipt, keys)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("answerDigest", receipts.digest({"inventory_level": {"available": 5}})),
        ("approvals", [{"by": "someone-else", "at": "2026-11-02T09:00:00.000000Z"}]),
        ("confirmation", None),
        ("policyVersion", receipts.policy_version({"quorum": 2}, None, ["high"])),
        ("step", "other"),
        ("answerStatus", 200),
    ],
)
def test_a_changed_statement_fails_with_mismatch(field: str, value: object) -> None:
    key = generate_signing_key()
    receipt = receipts.sign(key, facts())
    receipts.verify(receipt, KeySet({key.kid: key.public_key}))  # the positive control
    with pytest.raises(receipts.ReceiptSignatureMismatch):
        receipts.verify({**receipt, field: value}, KeySet({key.kid: key.public_key}))


def test_a_retired_key_still_verifies_and_an_unknown_key_fails() -> None:
    old, new, stranger = generate_signing_key(), generate_signing_key(), generate_signing_key()
    old_receipt = receipts.sign(old, facts())
    published = KeySet.from_jwks(jwks([new, old]))  # rotated: old kept for verification
    assert receipts.verify(old_receipt, published)["kid"] == old.kid
    assert receipts.verify(receipts.sign(new, facts()), published)["kid"] == new.kid
    with pytest.raises(receipts.ReceiptUnknownKey) as refused:
        receipts.verify(receipts.sign(stranger, facts()), published)
    assert refused.value.code == "receipt_unknown_key"
    # a forged kid naming a published key does not help the stranger
    forged = {**receipts.sign(stranger, facts()), "kid": new.kid}
    with pytest.raises(receipts.ReceiptSignatureMismatch):
        receipts.verify(forged, published)


@pytest.mark.parametrize(
    "document",
    [
        [],
        {"type": receipts.TYPE},
        "receipt",
    ],
)
def test_a_document_that_is_not_a_receipt_is_malformed(document: object) -> None:
    key = generate_signing_key()
    with pytest.raises(receipts.ReceiptMalformed):
        receipts.verify(document, KeySet({key.kid: key.public_key}))


def test_another_type_or_an_extra_field_is_malformed() -> None:
    key = generate_signing_key()
    keys = KeySet({key.kid: key.public_key})
    receipt = receipts.sign(key, facts())
    with pytest.raises(receipts.ReceiptMalformed):
        receipts.verify({**receipt, "type": "humanwork.io/audit-checkpoint/v1"}, keys)
    with pytest.raises(receipts.ReceiptMalformed):
        receipts.verify({**receipt, "note": "x"}, keys)
    with pytest.raises(receipts.ReceiptMalformed):
        receipts.parse(b"{not json")


def test_signoffs_are_read_from_the_step_status() -> None:
    keyed = {"idempotency_key": "k", "step_hash": "0" * 64}
    approve = Decision(verdict="approve", by="expert-1", at=T0, **keyed)
    second = Decision(verdict="approve", by="expert-2", at=T0 + timedelta(minutes=1), **keyed)
    confirmed = Confirmation(
        required=True, state="confirmed", by="client-1", at=T0, step_hash="0" * 64
    )
    quorum = StepStatus(id="write", approvals=(approve, second), decision=second)
    task = make_task(
        action("write", Risk.HIGH),
        status=AgenticTaskStatus(steps=(quorum.model_copy(update={"confirmation": confirmed}),)),
    )
    approvals, confirmation = receipts.signoffs(task, "write")
    assert [a.by for a in approvals] == ["expert-1", "expert-2"]
    assert confirmation == receipts.Signoff("client-1", receipts.timestamp(T0))
    single = make_task(
        action("write", Risk.HIGH),
        status=AgenticTaskStatus(steps=(StepStatus(id="write", decision=approve),)),
    )
    approvals, confirmation = receipts.signoffs(single, "write")
    assert approvals == [receipts.Signoff("expert-1", receipts.timestamp(T0), "approve")]
    assert confirmation is None


# --- `kubectl humanwork receipt verify`, offline -----------------------------------------


def verify_files(tmp_path: Path, document: object, keyset: object) -> tuple[int, str, str]:
    receipt_file, keys_file = tmp_path / "receipt.json", tmp_path / "keys.json"
    receipt_file.write_text(json.dumps(document))
    keys_file.write_text(json.dumps(keyset))
    out, err = io.StringIO(), io.StringIO()
    code = plugin.main(
        ["receipt", "verify", str(receipt_file), "--keys", str(keys_file)],
        env={},
        stdout=out,
        stderr=err,
    )
    return code, out.getvalue(), err.getvalue()


def test_the_plugin_verifies_offline_what_the_platform_signed(tmp_path: Path) -> None:
    old, new = generate_signing_key(), generate_signing_key()
    keyset = jwks([new, old])
    both = [receipts.sign(old, facts()), receipts.sign(new, facts(step="next"))]
    code, out, err = verify_files(tmp_path, {"items": both}, keyset)
    assert (code, err) == (0, ""), err
    assert out.count("verified org-acme/task") == 2 and "approved-by=expert-1" in out
    # one changed byte of the answer's digest: exit 7 and the reason
    changed = dict(both[1])
    digest = changed["answerDigest"]
    changed["answerDigest"] = digest[:-1] + ("0" if digest[-1] != "0" else "1")
    code, out, err = verify_files(tmp_path, [both[0], changed], keyset)
    assert code == 7 and "receipt 1: NOT VERIFIED receipt_signature_mismatch" in err
    assert "receipt 0: verified" in out
    # the retired key dropped from the set: its receipt no longer verifies
    code, _, err = verify_files(tmp_path, both[0], jwks([new]))
    assert code == 7 and "receipt_unknown_key" in err
    code, _, err = verify_files(tmp_path, {"type": receipts.TYPE}, keyset)
    assert code == 7 and "receipt_malformed" in err


def test_the_plugin_refuses_an_unreadable_key_set_with_a_usage_error(tmp_path: Path) -> None:
    key = generate_signing_key()
    code, _, err = verify_files(tmp_path, receipts.sign(key, facts()), {"nokeys": []})
    assert code == 2 and "no `keys` list" in err
