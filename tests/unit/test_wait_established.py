"""`humanwork_dev.cluster.wait_established` reads a definition just created, whose
`status.conditions` is null, as not yet Established (kubectl wait errored on it in CI)."""

from __future__ import annotations

import json

from humanwork_dev.crdwait import _not_established


def crd(name: str, conditions: object) -> dict[str, object]:
    return {
        "kind": "CustomResourceDefinition",
        "metadata": {"name": name},
        "status": {"conditions": conditions},
    }


def test_null_conditions_are_pending_and_established_true_is_not() -> None:
    established = [{"type": "Established", "status": "True"}]
    listing = {"kind": "List", "items": [crd("a.x", None), crd("b.x", established)]}
    assert _not_established(json.dumps(listing)) == ["a.x"]
    assert _not_established(json.dumps(crd("b.x", established))) == []
    assert _not_established(
        json.dumps(crd("c.x", [{"type": "Established", "status": "False"}]))
    ) == ["c.x"]
    assert _not_established(
        json.dumps({"kind": "CustomResourceDefinition", "metadata": {"name": "d.x"}})
    ) == ["d.x"]
