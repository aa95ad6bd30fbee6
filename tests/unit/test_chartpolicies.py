"""The chart's admission policies are the kustomize base's, made release-aware by one
mechanical rule (humanwork_dev.chartpolicies): the templates in the repository are current,
and a hand edit or a new base policy without its template is found."""

from __future__ import annotations

import shutil
from pathlib import Path

from humanwork_dev import chartpolicies

POLICY = """# who may write: humanwork-system/humanwork-platform
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: humanwork-example
spec:
  paramKind: {kind: ConfigMap}
  matchConstraints:
    namespaceSelector: {}
  validations:
    - expression: "request.userInfo.username != 'system:serviceaccount:humanwork-system:x'"
---
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: humanwork-example
spec:
  policyName: humanwork-example
  paramRef:
    name: humanwork-admission-params
"""


def test_the_repositorys_templates_are_current() -> None:
    assert chartpolicies.stale() == []


def test_own_names_are_prefixed_and_the_namespace_is_the_releases() -> None:
    out = chartpolicies.template(POLICY)
    assert out.startswith("{{- if .Values.policies.enabled }}\n") and out.endswith("{{- end }}\n")
    assert "humanwork-system" not in out
    assert "system:serviceaccount:{{ .Release.Namespace }}:x" in out
    assert out.count("name: {{ .Values.clusterResourcePrefix }}humanwork-example") == 2
    assert "policyName: {{ .Values.clusterResourcePrefix }}humanwork-example" in out
    # a reference deeper in the spec is not the object's own name: left as it is
    assert "    name: humanwork-admission-params" in out


def test_a_hand_edit_and_a_missing_template_are_found(tmp_path: Path) -> None:
    for part in (chartpolicies.BASE, chartpolicies.TEMPLATES):
        shutil.copytree(chartpolicies.REPO / part, tmp_path / part)
    assert chartpolicies.stale(tmp_path) == []
    edited = tmp_path / chartpolicies.TEMPLATES / "org-id.yaml"
    edited.write_text(edited.read_text().replace("policies.enabled", "policies.on"))
    (tmp_path / chartpolicies.BASE / "new-rule.yaml").write_text(POLICY)
    assert chartpolicies.stale(tmp_path) == [
        chartpolicies.TEMPLATES / "new-rule.yaml",
        chartpolicies.TEMPLATES / "org-id.yaml",
    ]
