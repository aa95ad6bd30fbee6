"""The resource models (validation mirrors the CRD's rules), the samples, and the admission
policy manifests (shape, messages, and agreement with the ownership rules of taskflow)."""

from __future__ import annotations

import copy
from datetime import timedelta
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from humanwork_core import taskflow as tf
from humanwork_core.policy import STRICT
from humanwork_core.resources import (
    ORG_ID_LABEL,
    AgenticTask,
    AgenticTaskSpec,
    AgenticTaskStatus,
    AgentInstance,
    Condition,
    ConditionStatus,
    Decision,
    Risk,
    Step,
    StepKind,
    StepStatus,
    TaskPhase,
    TaskPolicy,
    TokenPolicy,
    Verdict,
    find_condition,
    set_condition,
)

from .factories import ORG_ID, REPO, T0, action, load_yaml_documents, make_task

SAMPLES = REPO / "manifests" / "samples"
POLICIES = REPO / "manifests" / "base" / "policies"
PLATFORM_API = "system:serviceaccount:humanwork-system:humanwork-platform-api"
OPERATOR = "system:serviceaccount:humanwork-system:humanwork-operator"


def sample(name: str) -> dict[str, Any]:
    (document,) = load_yaml_documents(SAMPLES / name)
    return document


def task_manifest() -> dict[str, Any]:
    return copy.deepcopy(sample("agentictask.yaml"))


# --- samples -------------------------------------------------------------------------------


def test_samples_validate_against_the_models() -> None:
    namespace = sample("namespace.yaml")
    agent = AgentInstance.model_validate(sample("agentinstance.yaml"))
    task = AgenticTask.model_validate(sample("agentictask.yaml"))
    labels = namespace["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
    assert labels[ORG_ID_LABEL] == agent.spec.org_id == task.spec.org_id
    assert agent.metadata.namespace == task.metadata.namespace == namespace["metadata"]["name"]
    assert task.spec.agent_ref.name == agent.metadata.name
    assert {s.tool for s in task.spec.steps} <= set(agent.spec.enabled_tools)


def test_the_sample_task_is_the_seed_example() -> None:
    task = AgenticTask.model_validate(sample("agentictask.yaml"))
    assert task.spec.description == (
        "Reconcile all Amazon orders for October 2026 and update inventory in Shopify"
    )
    read, write = task.spec.steps
    assert (read.risk, read.tool, read.parameters["action"]) == (
        Risk.LOW,
        "amazon",
        "listOrders",
    )
    assert (write.risk, write.tool, write.parameters["action"]) == (
        Risk.HIGH,
        "shopify",
        "adjustInventoryLevel",
    )
    assert tf.tick(task, T0).phase.value == "PendingApproval"  # type: ignore[union-attr]


def test_sample_kustomization_lists_every_sample() -> None:
    kustomization = yaml.safe_load((SAMPLES / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    on_disk = {p.name for p in SAMPLES.glob("*.yaml")} - {"kustomization.yaml"}
    assert listed == on_disk
    assert kustomization["resources"][0] == "namespace.yaml"


def test_models_round_trip_through_the_wire_format() -> None:
    raw = sample("agentinstance.yaml")
    agent = AgentInstance.model_validate(raw)
    wire = agent.to_wire()
    assert wire["spec"]["llm"]["baseURL"] == "https://openrouter.ai/api/v1"
    assert wire["spec"]["egress"]["llmCIDRs"] == ["104.18.0.0/16"]
    assert wire["spec"]["orgId"] == ORG_ID
    assert AgentInstance.model_validate(wire) == agent
    task = AgenticTask.model_validate(sample("agentictask.yaml"))
    assert AgenticTask.from_wire(task.to_wire()) == task


def test_snake_case_is_accepted_in_python() -> None:
    spec = AgenticTaskSpec(
        org_id=ORG_ID,
        agent_ref={"name": "acme"},  # type: ignore[arg-type]
        description="d",
        requested_by="me",
        steps=(action("a"),),
    )
    assert spec.to_wire()["agentRef"] == {"name": "acme"}


# --- model validation mirrors the CRD rules ------------------------------------------------


def refused(manifest: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        AgenticTask.model_validate(manifest)


def test_a_task_has_at_least_one_and_at_most_fifty_steps() -> None:
    manifest = task_manifest()
    manifest["spec"]["steps"] = []
    refused(manifest, "at least 1")
    manifest["spec"]["steps"] = [
        {"id": f"s{i}", "description": "x", "tool": "t", "risk": "low"} for i in range(51)
    ]
    refused(manifest, "at most 50")


def test_step_ids_are_unique() -> None:
    manifest = task_manifest()
    manifest["spec"]["steps"][1]["id"] = manifest["spec"]["steps"][0]["id"]
    refused(manifest, "step ids must be unique")


def test_unknown_risk_and_kind_are_refused() -> None:
    manifest = task_manifest()
    manifest["spec"]["steps"][0]["risk"] = "extreme"
    refused(manifest, "risk")
    manifest = task_manifest()
    manifest["spec"]["steps"][0]["kind"] = "script"
    refused(manifest, "kind")


def test_step_shape_rules() -> None:
    with pytest.raises(ValidationError, match="names the tool"):
        Step(id="a", description="d", risk=Risk.LOW)
    with pytest.raises(ValidationError, match="only input steps"):
        Step(id="a", description="d", tool="t", risk=Risk.LOW, options=("x", "y"))
    with pytest.raises(ValidationError, match="at least two options"):
        Step(id="a", description="d", kind=StepKind.INPUT, risk=Risk.LOW, options=("x",))
    assert Step(id="a", description="d", kind=StepKind.INPUT, risk=Risk.LOW).tool is None


def test_bounds_are_positive() -> None:
    manifest = task_manifest()
    manifest["spec"]["policy"]["decisionDeadlineSeconds"] = -5
    refused(manifest, "greater than or equal to 1")
    manifest = task_manifest()
    manifest["spec"]["policy"]["escalation"]["intervalSeconds"] = 0
    refused(manifest, "greater than or equal to 1")
    manifest = task_manifest()
    manifest["spec"]["policy"]["requiredApprovals"]["critical"] = 0
    refused(manifest, "greater than or equal to 1")


def test_org_id_is_a_lowercase_uuid() -> None:
    manifest = task_manifest()
    manifest["spec"]["orgId"] = "acme"
    refused(manifest, "orgId")
    manifest["spec"]["orgId"] = ORG_ID.upper()
    refused(manifest, "orgId")


def test_unknown_fields_are_refused() -> None:
    manifest = task_manifest()
    manifest["spec"]["stepz"] = []
    refused(manifest, "stepz")
    manifest = task_manifest()
    manifest["kind"] = "AgentInstance"
    refused(manifest, "kind must be AgenticTask")


def test_policy_defaults_and_auto_approval_limits() -> None:
    policy = TaskPolicy()
    assert policy.auto_approve == ()
    assert policy.required_approvals.critical == 2
    with pytest.raises(ValidationError, match="auto-approved"):
        TaskPolicy(auto_approve=(Risk.CRITICAL,))


def test_agent_instance_rules() -> None:
    raw = copy.deepcopy(sample("agentinstance.yaml"))
    assert AgentInstance.model_validate(raw).spec.token.ttl_seconds == 86400
    bad = copy.deepcopy(raw)
    bad["spec"]["token"]["rotateBeforeSeconds"] = 86400
    with pytest.raises(ValidationError, match="rotateBeforeSeconds"):
        AgentInstance.model_validate(bad)
    bad = copy.deepcopy(raw)
    bad["spec"]["egress"]["llmCIDRs"] = ["10.0.0.1/8"]
    with pytest.raises(ValidationError, match="CIDR"):
        AgentInstance.model_validate(bad)
    bad = copy.deepcopy(raw)
    bad["spec"]["resources"]["limits"]["memory"] = "lots"
    with pytest.raises(ValidationError, match="quantity"):
        AgentInstance.model_validate(bad)
    bad = copy.deepcopy(raw)
    bad["spec"]["temperature"] = 3
    with pytest.raises(ValidationError, match="temperature"):
        AgentInstance.model_validate(bad)
    with pytest.raises(ValidationError):
        TokenPolicy(ttl_seconds=100)


def test_decisions_carry_their_payload() -> None:
    common: dict[str, Any] = {"by": "a", "at": T0, "idempotency_key": "k", "step_hash": "0" * 64}
    with pytest.raises(ValidationError, match="amended parameters"):
        Decision(verdict=Verdict.EDIT, **common)
    with pytest.raises(ValidationError, match="selected option"):
        Decision(verdict=Verdict.SELECT, **common)
    with pytest.raises(ValidationError, match=r"stepHash|step_hash"):
        Decision(verdict=Verdict.APPROVE, **{**common, "step_hash": "abc"})
    with pytest.raises(ValidationError):
        Decision(verdict=Verdict.APPROVE, **{**common, "at": T0.replace(tzinfo=None)})


def test_status_helpers() -> None:
    status = AgenticTaskStatus()
    updated = status.with_step(StepStatus(id="a", escalations=1))
    assert updated.step("a").escalations == 1 and status.steps == ()
    again = updated.with_step(StepStatus(id="a", escalations=2))
    assert [s.escalations for s in again.steps] == [2]
    task = make_task()
    assert task.step("read") is not None and task.step("nope") is None


def test_models_are_frozen() -> None:
    task = make_task()
    with pytest.raises(ValidationError):
        task.spec.description = "changed"


def test_set_condition_moves_the_transition_time_only_on_a_status_change() -> None:
    ready = Condition(
        type="Ready", status=ConditionStatus.FALSE, reason="Provisioning", last_transition_time=T0
    )
    later = T0 + timedelta(minutes=5)
    conditions = set_condition((), ready, now=T0)
    same = set_condition(
        conditions, ready.model_copy(update={"message": "still waiting"}), now=later
    )
    current = find_condition(same, "Ready")
    assert current is not None and current.last_transition_time == T0
    assert current.message == "still waiting"
    flipped = set_condition(
        same, ready.model_copy(update={"status": ConditionStatus.TRUE}), now=later
    )
    current = find_condition(flipped, "Ready")
    assert current is not None and current.last_transition_time == later
    assert len(flipped) == 1 and find_condition(flipped, "TokenValid") is None


# --- admission policies --------------------------------------------------------------------


def policy_documents() -> dict[str, list[dict[str, Any]]]:
    return {p.name: load_yaml_documents(p) for p in sorted(POLICIES.glob("*.yaml"))}


def policies() -> dict[str, dict[str, Any]]:
    return {
        doc["metadata"]["name"]: doc
        for docs in policy_documents().values()
        for doc in docs
        if doc["kind"] == "ValidatingAdmissionPolicy"
    }


def test_policy_kustomization_lists_every_file() -> None:
    kustomization = yaml.safe_load((POLICIES / "kustomization.yaml").read_text())
    on_disk = {p.name for p in POLICIES.glob("*.yaml")} - {"kustomization.yaml"}
    assert set(kustomization["resources"]) == on_disk


def test_every_policy_is_bound_and_denies() -> None:
    documents = [doc for docs in policy_documents().values() for doc in docs]
    bindings = {
        doc["spec"]["policyName"]: doc
        for doc in documents
        if doc["kind"] == "ValidatingAdmissionPolicyBinding"
    }
    assert (
        set(bindings)
        == set(policies())
        == {
            "humanwork-org-id-matches-namespace",
            "humanwork-task-status-integrity",
            "humanwork-task-status-writers",
            "humanwork-agent-task-identity",
            "humanwork-admission-params-guard",
            "humanwork-agent-instance-spec-guard",
            "humanwork-operator-org-binding",
            "humanwork-operator-namespace-labels",
            "humanwork-operator-secrets",
            "humanwork-component-scope",
            "humanwork-operator-workloads",
            "humanwork-operator-agent-roles",
            "humanwork-platform-namespaces",
            "humanwork-agent-instance-bounds",
        }
    )
    for name, policy in policies().items():
        assert policy["apiVersion"] == "admissionregistration.k8s.io/v1"
        assert policy["spec"]["failurePolicy"] == "Fail"
        assert bindings[name]["spec"]["validationActions"] == ["Deny"]
        if "paramKind" in policy["spec"]:
            assert bindings[name]["spec"]["paramRef"]["parameterNotFoundAction"] == "Deny"


def test_every_validation_has_a_single_line_message() -> None:
    for name, policy in policies().items():
        validations = policy["spec"]["validations"]
        assert validations, name
        for validation in validations:
            assert validation["expression"].strip()
            # a fixed message, or an expression that names what was refused
            message = validation.get("message") or validation["messageExpression"]
            assert message.strip() and "\n" not in message, (name, validation["expression"])
            assert validation.get("reason", "Invalid") in {"Forbidden", "Invalid"}


def test_org_id_policy_covers_both_kinds_on_create_and_update() -> None:
    policy = policies()["humanwork-org-id-matches-namespace"]
    (rule,) = policy["spec"]["matchConstraints"]["resourceRules"]
    assert rule["apiGroups"] == ["humanwork.io"]
    assert set(rule["resources"]) == {"agentinstances", "agentictasks"}
    assert set(rule["operations"]) == {"CREATE", "UPDATE"}
    text = yaml.safe_dump(policy)
    assert "namespaceObject.metadata.labels" in text and ORG_ID_LABEL in text


def test_status_policies_match_the_status_subresource_only() -> None:
    for name in ("humanwork-task-status-integrity", "humanwork-task-status-writers"):
        (rule,) = policies()[name]["spec"]["matchConstraints"]["resourceRules"]
        assert rule["resources"] == ["agentictasks/status"], name
        assert rule["operations"] == ["UPDATE"]


def test_only_cluster_admins_are_exempt_and_only_from_the_writer_rules() -> None:
    writers = policies()["humanwork-task-status-writers"]
    (condition,) = writers["spec"]["matchConditions"]
    assert "system:masters" in condition["expression"]
    for name in ("humanwork-org-id-matches-namespace", "humanwork-task-status-integrity"):
        assert "matchConditions" not in policies()[name]["spec"]


def test_writer_identities_come_from_the_params_with_the_documented_defaults() -> None:
    (configmap,) = [doc for doc in policy_documents()["params.yaml"] if doc["kind"] == "ConfigMap"]
    assert configmap["data"]["platformApiUser"] == PLATFORM_API
    assert configmap["data"]["operatorUser"] == OPERATOR
    assert configmap["data"]["agentServiceAccountSuffix"] == "-agent"
    writers = policies()["humanwork-task-status-writers"]
    binding = next(
        doc
        for doc in policy_documents()["task-status-writers.yaml"]
        if doc["kind"] == "ValidatingAdmissionPolicyBinding"
    )
    ref = binding["spec"]["paramRef"]
    assert (ref["name"], ref["namespace"]) == (
        configmap["metadata"]["name"],
        configmap["metadata"]["namespace"],
    )
    variables = {v["name"]: v["expression"] for v in writers["spec"]["variables"]}
    assert PLATFORM_API in variables["platformApi"] and OPERATOR in variables["operator"]
    assert "object.spec.agentRef.name" in variables["agent"]
    assert "request.userInfo.username" in variables["user"]


def test_writer_policy_uses_the_same_field_ownership_as_taskflow() -> None:
    variables = {
        v["name"]: v["expression"]
        for v in policies()["humanwork-task-status-writers"]["spec"]["variables"]
    }
    operator_fields = yaml.safe_load(variables["operatorFields"].replace("'", '"'))
    operator_step_fields = yaml.safe_load(variables["operatorStepFields"].replace("'", '"'))
    assert tuple(operator_fields) == tf.OPERATOR_STATUS_FIELDS
    assert tuple(operator_step_fields) == tf.STEP_FIELDS[tf.Writer.OPERATOR]
    # Every status field has exactly one writer.
    status_fields = {
        field.alias or name for name, field in AgenticTaskStatus.model_fields.items()
    } - {"steps"}
    assert status_fields == set(tf.OPERATOR_STATUS_FIELDS)
    step_fields = {f.alias or n for n, f in StepStatus.model_fields.items()} - {"id"}
    owned = [name for fields in tf.STEP_FIELDS.values() for name in fields]
    assert sorted(owned) == sorted(step_fields)
    expressions = " ".join(
        v["expression"] for v in policies()["humanwork-task-status-writers"]["spec"]["validations"]
    )
    for name in tf.STEP_FIELDS[tf.Writer.PLATFORM_API] + tf.STEP_FIELDS[tf.Writer.AGENT]:
        assert f"s.{name}" in expressions


def test_integrity_policy_names_the_terminal_phases() -> None:
    integrity = yaml.safe_dump(policies()["humanwork-task-status-integrity"])
    for phase in TaskPhase:
        assert (f"'{phase.value}'" in integrity) == phase.terminal, phase


# --- the policies' CEL, evaluated in-process with cel-python (a test dependency) ---


def _evaluate(policy: dict[str, Any], activation: dict[str, Any]) -> list[str]:
    import celpy

    celtypes = celpy.celtypes
    env = celpy.Environment()

    def run(expression: str, values: dict[str, Any]) -> Any:
        return env.program(env.compile(expression)).evaluate(values)

    values = {k: celpy.json_to_cel(v) if v is not None else None for k, v in activation.items()}
    spec = policy["spec"]
    for condition in spec.get("matchConditions", []):
        if not run(condition["expression"], values):
            return []
    variables: dict[Any, Any] = {}
    for variable in spec.get("variables", []):
        values["variables"] = celtypes.MapType(variables)
        variables[celtypes.StringType(variable["name"])] = run(variable["expression"], values)
    values["variables"] = celtypes.MapType(variables)
    return [
        v["message"]
        for v in spec["validations"]
        if run(v["expression"], values) is not True
        and run(v["expression"], values) != celtypes.BoolType(True)
    ]


def _status_write(old: AgenticTask, body: dict[str, Any], user: str) -> list[str]:
    def merge(status: dict[str, Any]) -> dict[str, Any]:
        merged = copy.deepcopy(status)
        for key, value in body.items():
            if key != "steps":
                merged[key] = value
        entries = merged.setdefault("steps", [])
        for entry in body.get("steps", []):
            match = next((e for e in entries if e["id"] == entry["id"]), None)
            if match is None:
                entries.append(dict(entry))
            else:
                match.update(entry)
        return merged

    old_wire = old.to_wire()
    new_wire = copy.deepcopy(old_wire)
    new_wire["status"] = merge(old_wire.get("status", {}))
    params = next(d for d in policy_documents()["params.yaml"] if d["kind"] == "ConfigMap")
    failures: list[str] = []
    for name in ("humanwork-task-status-integrity", "humanwork-task-status-writers"):
        failures += _evaluate(
            policies()[name],
            {
                "object": new_wire,
                "oldObject": old_wire,
                "request": {"userInfo": {"username": user, "groups": []}},
                "params": params,
            },
        )
    return failures


def test_policies_let_each_writer_write_its_own_part_and_nothing_else() -> None:
    agent = "system:serviceaccount:org-acme:acme-ecommerce-agent"
    task = make_task()
    task = task.model_copy(update={"status": tf.tick(task, T0)})
    read = task.step("read")
    assert read is not None
    request = tf.DecisionRequest(
        verdict="approve",  # type: ignore[arg-type]
        by="alice",
        step_hash=tf.step_hash(read),
        idempotency_key="k",
    )
    decided = tf.owned_status(
        tf.decide(task, "read", request, T0, org=STRICT), tf.Writer.PLATFORM_API
    )
    assert _status_write(task, decided, PLATFORM_API) == []
    assert _status_write(task, decided, agent)
    assert _status_write(task, decided, OPERATOR)
    task = task.model_copy(update={"status": tf.decide(task, "read", request, T0, org=STRICT)})
    started = tf.owned_status(tf.start_execution(task, "read", T0), tf.Writer.AGENT)
    assert _status_write(task, started, agent) == []
    assert _status_write(task, started, PLATFORM_API)
    overwrite: dict[str, Any] = {
        "steps": [{"id": "read", "decision": {**decided["steps"][0]["decision"]}}]
    }
    overwrite["steps"][0]["decision"]["verdict"] = "reject"
    assert "a step decision, once written, cannot be changed or removed" in _status_write(
        task, overwrite, PLATFORM_API
    )
