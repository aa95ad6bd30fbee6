"""The agent bounds as the platform API checks them (humanwork_core.agent_bounds): each
field beyond a bound is named with the bound, the allowed form of each passes, and the
defaults are those of the admission parameters (params.yaml) and of the policy itself."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from humanwork_core import agent_bounds as ab

REPO = Path(__file__).resolve().parents[2]
PARAMS = REPO / "manifests/base/policies/params.yaml"
POLICY = REPO / "manifests/base/policies/agent-bounds.yaml"


def _params() -> dict[str, str]:
    docs = list(yaml.safe_load_all(PARAMS.read_text()))
    return next(d for d in docs if d["kind"] == "ConfigMap")["data"]


def test_the_defaults_are_the_parameters_and_the_policys_own() -> None:
    data = _params()
    assert {k: data[k] for k in ab.DEFAULTS} == dict(ab.DEFAULTS)
    policy = POLICY.read_text().replace("\n        ", " ")
    for key in (ab.IMAGES, ab.EGRESS_DENIED, ab.MAX_CPU, ab.MAX_MEMORY):
        assert f"'{ab.DEFAULTS[key]}'" in policy, key


def _violations(spec: dict[str, Any], **params: str) -> list[tuple[str, str]]:
    bounds = ab.AgentBounds.from_params({**ab.DEFAULTS, **params})
    return [(v.field, v.bound) for v in ab.check(spec, bounds)]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"image": "evil/miner:1"}, [("spec.image", ab.IMAGES)]),
        (
            {"egress": {"extra": [{"cidr": "169.254.169.254/32"}]}},
            [("spec.egress.extra[0].cidr", ab.EGRESS_DENIED)],
        ),
        ({"egress": {"llmCIDRs": ["0.0.0.0/0"]}}, [("spec.egress.llmCIDRs[0]", ab.EGRESS_DENIED)]),
        (
            {"egress": {"llmCIDRs": ["10.96.0.0/12"]}},
            [("spec.egress.llmCIDRs[0]", ab.EGRESS_DENIED)],
        ),
        (
            {"egress": {"llmCIDRs": ["127.0.0.1/32"]}},
            [("spec.egress.llmCIDRs[0]", ab.EGRESS_DENIED)],
        ),
        ({"egress": {"llmCIDRs": ["fe80::/64"]}}, [("spec.egress.llmCIDRs[0]", ab.EGRESS_DENIED)]),
        (
            {"egress": {"llmCIDRs": ["::ffff:a9fe:a9fe/128"]}},
            [("spec.egress.llmCIDRs[0]", ab.EGRESS_DENIED)],
        ),
        (
            {"tolerations": [{"operator": "Exists"}]},
            [("spec.tolerations[0].key", ab.TOLERATION_KEYS)],
        ),
        (
            {"nodeSelector": {"node-role.kubernetes.io/control-plane": ""}},
            [("spec.nodeSelector.node-role.kubernetes.io/control-plane", ab.NODE_SELECTORS)],
        ),
        ({"runtimeClassName": "privileged-runc"}, [("spec.runtimeClassName", ab.RUNTIME_CLASSES)]),
        (
            {"resources": {"limits": {"cpu": "64", "memory": "512Mi"}}},
            [("spec.resources.limits.cpu", ab.MAX_CPU)],
        ),
        (
            {"resources": {"requests": {"memory": "5Gi"}}},
            [("spec.resources.requests.memory", ab.MAX_MEMORY)],
        ),
    ],
)
def test_each_field_beyond_a_bound_is_named_with_its_bound(
    spec: dict[str, Any], expected: list[tuple[str, str]]
) -> None:
    assert _violations(spec) == expected


def test_the_allowed_forms_pass() -> None:
    spec = {
        "image": "humanwork/agent:0.2.0",
        "egress": {"llmCIDRs": ["104.18.0.0/16"], "extra": [{"cidr": "2001:db8::/32"}]},
        "resources": {"requests": {"cpu": "250m", "memory": "256Mi"}, "limits": {"cpu": 2}},
    }
    assert _violations(spec) == []
    widened = {
        ab.TOLERATION_KEYS: "humanwork.dev/sandbox",
        ab.NODE_SELECTORS: "type=kwok,pool",
        ab.RUNTIME_CLASSES: "gvisor",
        ab.EGRESS_ALLOWED: "10.213.0.0/16",
    }
    scheduled = {
        "tolerations": [{"key": "humanwork.dev/sandbox", "operator": "Exists"}],
        "nodeSelector": {"type": "kwok", "pool": "agents"},
        "runtimeClassName": "gvisor",
        "egress": {"extra": [{"cidr": "10.213.4.0/24"}]},
    }
    assert _violations(scheduled, **widened) == []
    # the exception covers what lies inside it, not more
    wider = {"egress": {"extra": [{"cidr": "10.0.0.0/8"}]}}
    assert _violations(wider, **widened) == [("spec.egress.extra[0].cidr", ab.EGRESS_DENIED)]
    assert _violations({"nodeSelector": {"type": "real"}}, **widened) == [
        ("spec.nodeSelector.type", ab.NODE_SELECTORS)
    ]


def test_quantities_and_bad_parameters() -> None:
    assert ab.quantity("250m") == Decimal("0.25")
    assert ab.quantity("4Gi") == 4 * 1024**3
    assert ab.quantity(2) == 2
    with pytest.raises(ab.BoundsError):
        ab.AgentBounds.from_params({ab.MAX_CPU: "lots"})
    with pytest.raises(ab.BoundsError):
        ab.AgentBounds.from_params({ab.EGRESS_DENIED: "not-a-cidr"})
