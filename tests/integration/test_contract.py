"""The resource contract on a real API server: CRDs, CEL rules and admission policies.

The CRDs and the policies are installed as users install them (`kubectl apply -k`); the
identities are real ServiceAccounts with TokenRequest tokens (no impersonation): the
platform API and the operator in humanwork-system, the task's agent `<agentRef>-agent`
in the org namespace, another agent of the same org and an unrelated ServiceAccount, all
with the same RBAC grants, so that every refusal below comes from the contract itself.
"""

from __future__ import annotations

import copy
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from string import Template
from typing import Any

import pytest
import yaml
from kubernetes import client

from humanwork_core import taskflow
from humanwork_core.policy import STRICT
from humanwork_core.resources import (
    GROUP,
    VERSION,
    AgenticTask,
    AgenticTaskSpec,
    AgentInstanceSpec,
    Condition,
    ConditionStatus,
    Decision,
    Step,
    StepStatus,
    TokenPolicy,
)
from humanwork_dev.processes import OperatorProcess
from tests.conftest import Cluster
from tests.integration.contract_support import (
    ADMIN,
    AGENT,
    AGENT_NAME,
    INTRUDER,
    OPERATOR,
    OTHER_AGENT,
    PLATFORM,
    REPO,
    Contract,
    Resources,
    agent_finish,
    agent_instance_body,
    agent_start,
    api_error,
    decision,
    delete_namespaces,
    execution,
    installed_contract,
    new_task,
    now,
    operator_tick,
    platform_decide,
    start_task,
    status_steps,
    step_index,
    task_body,
)
from tests.support import eventually

OTHER_ORG = "0b9d6a52-5c1e-4f7a-9d3b-6e2f8a1c4d70"


@pytest.fixture(scope="module", autouse=True)
def without_the_operator() -> Iterator[None]:
    """These tests write task status by hand as each of the three writers and check that
    refused writes change nothing: a running operator ticking the same tasks would. Pause
    any operator the session started before this module, and resume it afterwards."""
    paused = OperatorProcess.running()
    for process in paused:
        process.stop()
    yield
    for process in paused:
        process.start()


@pytest.fixture(scope="module")
def contract(cluster: Cluster) -> Iterator[Contract]:
    yield from installed_contract(cluster)


def normalised(text: str) -> str:
    return " ".join(text.split())


# --- install, samples, kubectl ----------------------------------------------------------


def test_crds_and_policies_are_installed_and_in_force(contract: Contract) -> None:
    ext = client.ApiextensionsV1Api(contract.cluster.api)
    for name in ("agentictasks.humanwork.io", "agentinstances.humanwork.io"):
        crd = ext.read_custom_resource_definition(name)
        established = {c.type: c.status for c in crd.status.conditions}
        assert established.get("Established") == "True"
        assert established.get("NamesAccepted") == "True"
        assert crd.spec.names.categories == ["humanwork"]
    admission = client.AdmissionregistrationV1Api(contract.cluster.api)
    for name in (
        "humanwork-org-id-matches-namespace",
        "humanwork-task-status-integrity",
        "humanwork-task-status-writers",
        "humanwork-agent-task-identity",
        "humanwork-admission-params-guard",
        "humanwork-agent-instance-spec-guard",
    ):
        policy = admission.read_validating_admission_policy(name)
        # the server type-checked every expression and found nothing wrong
        warnings = (policy.status.type_checking.expression_warnings or []) if policy.status else []
        assert warnings == [], f"{name}: {warnings}"
        binding = admission.read_validating_admission_policy_binding(name)
        assert binding.spec.validation_actions == ["Deny"]


def _rendered_samples(cluster: Cluster, namespace: str) -> list[dict[str, Any]]:
    """manifests/samples/ as kustomize renders it, moved to a namespace of our own (the
    sample's namespace has a fixed name that parallel runs would share)."""
    rendered = cluster.kubectl("kustomize", str(REPO / "manifests" / "samples")).stdout
    docs = [doc for doc in yaml.safe_load_all(rendered) if doc]
    sample_ns = next(d["metadata"]["name"] for d in docs if d["kind"] == "Namespace")
    for doc in docs:
        if doc["kind"] == "Namespace":
            doc["metadata"]["name"] = namespace
        else:
            assert doc["metadata"]["namespace"] == sample_ns
            doc["metadata"]["namespace"] = namespace
    return docs


Table = tuple[list[str], list[dict[str, str]]]


def _tables(output: str) -> dict[str, Table]:
    """`kubectl get` output of several kinds: (header, rows) per kind (the part of NAME
    before the slash)."""
    tables: dict[str, Table] = {}
    for block in output.strip().split("\n\n"):
        lines = block.strip().splitlines()
        header = lines[0].split()
        rows = [dict(zip(header, line.split(), strict=True)) for line in lines[1:]]
        tables[rows[0]["NAME"].split("/")[0]] = (header, rows)
    return tables


def test_samples_are_accepted_and_kubectl_shows_their_columns(
    contract: Contract, tmp_path: Path
) -> None:
    cluster = contract.cluster
    namespace = f"org-acme-{uuid.uuid4().hex[:8]}"
    docs = _rendered_samples(cluster, namespace)
    assert sorted(d["kind"] for d in docs) == ["AgentInstance", "AgenticTask", "Namespace"]
    core = client.CoreV1Api(cluster.api)
    try:
        applied = cluster.kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(docs)).stdout
        assert "agentictask.humanwork.io/reconcile-amazon-october created" in applied
        assert "agentinstance.humanwork.io/acme-ecommerce created" in applied
        admin = Resources(cluster.api, namespace, "contract-test-admin")
        task = admin.get("reconcile-amazon-october")
        sample_task = next(d for d in docs if d["kind"] == "AgenticTask")
        assert task["spec"]["steps"] == sample_task["spec"]["steps"]
        assert [s["risk"] for s in task["spec"]["steps"]] == ["low", "high"]
        assert admin.of("agentinstances").get("acme-ecommerce")["spec"]["replicas"] == 1

        # the operator writes the derived status of the sample task with kubectl, through
        # its own token and field manager, as the printer columns read it
        model = AgenticTask.from_wire(task)
        status = taskflow.owned_status(taskflow.tick(model, now()), taskflow.Writer.OPERATOR)
        body = {
            "apiVersion": task["apiVersion"],
            "kind": "AgenticTask",
            "metadata": {"name": "reconcile-amazon-october", "namespace": namespace},
            "status": status,
        }
        kubeconfig = contract.kubeconfig_for(OPERATOR, tmp_path / "operator.kubeconfig")
        done = cluster.kubectl(
            "--kubeconfig",
            str(kubeconfig),
            "apply",
            "--server-side",
            "--subresource=status",
            "--field-manager=humanwork-operator",
            "-f",
            "-",
            stdin=json.dumps(body),
        )
        assert "serverside-applied" in done.stdout
        task = admin.get("reconcile-amazon-october")
        assert task["status"]["phase"] == "PendingApproval"
        # the AgentInstance status is the operator's too (no status policy covers it)
        agents = admin.of("agentinstances")
        issued = now().replace(microsecond=0)
        agents.merge_status(
            "acme-ecommerce",
            {
                "phase": "Ready",
                "replicas": 1,
                "readyReplicas": 1,
                "token": {
                    "kid": "k1",
                    "jti": "j1",
                    "issuedAt": issued.isoformat().replace("+00:00", "Z"),
                    "expiresAt": (issued + timedelta(days=1)).isoformat().replace("+00:00", "Z"),
                    "secretName": "acme-ecommerce-token",
                },
            },
        )

        def shown(value: object) -> str:
            return "<none>" if value is None else str(value)

        def columns_match_the_objects() -> dict[str, Table]:
            # an operator run by another module may be reconciling the AgentInstance at
            # this moment: compare with the object as it was while kubectl read it
            agent = agents.get("acme-ecommerce")
            tables = _tables(cluster.kubectl("get", "humanwork", "-n", namespace).stdout)
            again = agents.get("acme-ecommerce")
            assert again["metadata"]["resourceVersion"] == agent["metadata"]["resourceVersion"]
            status = agent.get("status") or {}
            expected = {
                "NAME": "agentinstance.humanwork.io/acme-ecommerce",
                "PHASE": shown(status.get("phase")),
                "READY": shown(status.get("readyReplicas")),
                "REPLICAS": shown(agent["spec"]["replicas"]),
                "TOKEN-EXPIRY": shown((status.get("token") or {}).get("expiresAt")),
            }
            row = tables["agentinstance.humanwork.io"][1][0]
            assert {key: row[key] for key in expected} == expected
            assert row["PHASE"] != "<none>" and row["TOKEN-EXPIRY"] != "<none>"
            return tables

        tables = eventually(columns_match_the_objects, timeout=30)
        header, rows = tables["agentictask.humanwork.io"]
        assert header == ["NAME", "PHASE", "STEP", "RISK", "DEADLINE", "AGE"]
        assert len(rows) == 1
        assert rows[0]["NAME"] == "agentictask.humanwork.io/reconcile-amazon-october"
        assert rows[0]["PHASE"] == "PendingApproval"
        assert rows[0]["STEP"] == "fetch-amazon-orders"
        assert rows[0]["RISK"] == "high"
        assert rows[0]["DEADLINE"] == task["status"]["nextDeadline"]
        header, rows = tables["agentinstance.humanwork.io"]
        assert header == ["NAME", "PHASE", "READY", "REPLICAS", "TOKEN-EXPIRY", "AGE"]
        assert len(rows) == 1 and rows[0]["REPLICAS"] == "1"
        # short names work too
        short = cluster.kubectl("get", "task,agent", "-n", namespace, "-o", "name").stdout
        assert short.split() == [
            "agentictask.humanwork.io/reconcile-amazon-october",
            "agentinstance.humanwork.io/acme-ecommerce",
        ]
    finally:
        delete_namespaces(core, [namespace])


def _explain(cluster: Cluster, field: str) -> str:
    def run() -> str:
        done = cluster.kubectl("explain", field, check=False)
        assert done.returncode == 0, done.stderr
        return done.stdout

    return normalised(eventually(run, timeout=30))


def test_kubectl_explain_shows_the_model_descriptions(contract: Contract) -> None:
    steps = _explain(contract.cluster, "agentictask.spec.steps")
    expected = [
        AgenticTaskSpec.model_fields["steps"].description,
        *(Step.model_fields[f].description for f in ("id", "description", "kind", "tool", "risk")),
        Step.model_fields["options"].description,
    ]
    for text in expected:
        assert text and normalised(text) in steps
    assert "enum: low, medium, high, critical" in steps
    assert "enum: action, input" in steps

    decision_doc = _explain(contract.cluster, "agentictask.status.steps.decision")
    assert normalised(str(StepStatus.model_fields["decision"].description)) in decision_doc
    assert normalised(str(Decision.model_fields["step_hash"].description)) in decision_doc
    assert normalised(str(Decision.model_fields["idempotency_key"].description)) in decision_doc

    token = _explain(contract.cluster, "agentinstance.spec.token")
    assert normalised(str(AgentInstanceSpec.model_fields["token"].description)) in token
    assert normalised(str(TokenPolicy.model_fields["ttl_seconds"].description)) in token


def test_kubectl_scale_changes_agent_replicas(contract: Contract) -> None:
    name = f"scaled-{uuid.uuid4().hex[:6]}"
    agents = contract.admin.of("agentinstances")
    agents.create(agent_instance_body(name, contract.namespace, contract.org_id))
    assert agents.get(name)["spec"]["replicas"] == 1
    done = contract.cluster.kubectl(
        "scale", "agentinstance", name, "-n", contract.namespace, "--replicas=3"
    )
    assert f"agentinstance.humanwork.io/{name} scaled" in done.stdout
    assert agents.get(name)["spec"]["replicas"] == 3
    scale = client.CustomObjectsApi(contract.cluster.api).get_namespaced_custom_object_scale(
        GROUP, VERSION, contract.namespace, "agentinstances", name
    )
    assert scale["spec"]["replicas"] == 3
    # the bounds of spec.replicas hold through the scale subresource too
    refused = contract.cluster.kubectl(
        "scale", "agentinstance", name, "-n", contract.namespace, "--replicas=21", check=False
    )
    assert refused.returncode != 0
    assert "less than or equal to 20" in refused.stderr
    assert agents.get(name)["spec"]["replicas"] == 3


# --- refused objects and writes --------------------------------------------------------------


Body = dict[str, Any]
Write = Callable[[Resources, Body, Contract], object]


@dataclass(frozen=True)
class Refusal:
    """One malformed or forbidden object or write, and how the API server refuses it.

    `start` is "new" (a create: `write` gets a valid body to spoil), "agent-instance" (an
    existing AgentInstance) or a state of a task brought about by the real writers (see
    contract_support.STARTS). `message` is a substring of the refusal and may use
    ${ns}, ${unlabelled}, ${org}, ${other_org}, ${actor} (the acting identity's username)
    and ${platform}, ${operator}, ${agent}, ${other_agent}, ${intruder}.
    """

    start: str
    actor: str
    write: Write
    status: int
    message: str
    plural: str = "agentictasks"


def put(path: str, value: Any) -> Callable[[Body], None]:
    """Set a dotted path (list indices as numbers) in a body."""

    def apply(body: Body) -> None:
        *parents, last = path.split(".")
        node: Any = body
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        if isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return apply


def create(*changes: Callable[[Body], None]) -> Write:
    """Spoil a valid body, fill in placeholders such as ${unlabelled}, create it."""

    def write(res: Resources, body: Body, contract: Contract) -> object:
        for change in changes:
            change(body)
        return res.create(_fill_body(body, contract))

    return write


def _in_unlabelled(body: Body) -> None:
    # the contract fixture fills in the real name through this marker
    body["metadata"]["namespace"] = "${unlabelled}"


def _many_steps(body: Body) -> None:
    body["spec"]["steps"] = [
        {"id": f"s{i}", "description": f"step {i}", "tool": "shopify_query", "risk": "low"}
        for i in range(51)
    ]


def _duplicate_ids(body: Body) -> None:
    body["spec"]["steps"][1]["id"] = body["spec"]["steps"][0]["id"]


def _one_option(body: Body) -> None:
    body["spec"]["steps"].append(
        {
            "id": "pick-warehouse",
            "description": "Which warehouse?",
            "kind": "input",
            "options": ["berlin"],
            "risk": "low",
        }
    )


def _options_on_action(body: Body) -> None:
    body["spec"]["steps"][0]["options"] = ["a", "b"]


def _no_tool(body: Body) -> None:
    del body["spec"]["steps"][0]["tool"]


def spec_json_patch(*ops: dict[str, Any]) -> Write:
    return lambda res, obj, contract: res.json_patch(obj["metadata"]["name"], list(ops))


def spec_merge(patch: Body) -> Write:
    return lambda res, obj, contract: res.merge(obj["metadata"]["name"], patch)


def with_step(
    step_id: str, **fields: Callable[[Body], Any]
) -> Callable[[Resources, Body, Contract], object]:
    """Server-side apply of one status.steps entry with the given fields (computed from
    the current object), as the acting identity's field manager."""

    def write(res: Resources, obj: Body, contract: Contract) -> object:
        entry = {"id": step_id, **{k: make(obj) for k, make in fields.items()}}
        return res.apply_status(obj["metadata"]["name"], {"steps": [entry]})

    return write


def status_merge(make: Callable[[Body], Body]) -> Write:
    """JSON merge patch of status with a body computed from the current object."""
    return lambda res, obj, contract: res.merge_status(obj["metadata"]["name"], make(obj))


def status_remove(step_id: str, field_name: str) -> Write:
    """JSON patch that removes one field of a status.steps entry."""

    def write(res: Resources, obj: Body, contract: Contract) -> object:
        index = step_index(obj, step_id)
        return res.json_patch_status(
            obj["metadata"]["name"],
            [{"op": "remove", "path": f"/status/steps/{index}/{field_name}"}],
        )

    return write


def steps_with(step_id: str, **changes: Any) -> Callable[[Body], Body]:
    """The whole current status.steps with one entry changed (None removes a field)."""

    def make(obj: Body) -> Body:
        steps = status_steps(obj)
        entry = next((s for s in steps if s["id"] == step_id), None)
        if entry is None:
            entry = {"id": step_id}
            steps.append(entry)
        for key, value in changes.items():
            if callable(value):
                value = value(obj, entry)
            if value is None:
                entry.pop(key, None)
            else:
                entry[key] = value
        return {"steps": steps}

    return make


def current(step_id: str, field_name: str) -> Callable[[Body], Any]:
    """The value a field of a status.steps entry has now."""
    return lambda obj: status_steps(obj)[step_index(obj, step_id)][field_name]


def fresh_decision(verdict: str = "approve", by: str = "mallory@acme.example") -> Any:
    return lambda obj, entry=None: decision(obj, "fetch-orders", verdict, by)


def changed_verdict(obj: Body, entry: Body) -> Body:
    return {**entry["decision"], "verdict": "reject", "feedback": "changed my mind"}


PLATFORM_ONLY = (
    "step decisions may be written only by the platform API (${platform}); not by ${actor}"
)
APPROVALS_PLATFORM_ONLY = (
    "step approvals may be written only by the platform API (${platform}); not by ${actor}"
)
RESOLUTION_PLATFORM_ONLY = (
    "step resolutions may be written only by the platform API (${platform}); not by ${actor}"
)
FORGED_RESOLUTION = {
    "outcome": "applied",
    "attempt": 1,
    "by": "mallory@acme.example",
    "at": "2026-11-30T12:00:00Z",
}
AGENT_ONLY = "step executions may be written only by the task agent (${agent}); not by ${actor}"
OPERATOR_ONLY = (
    "phase, current step, risk, next deadline, conditions and timestamps may be written "
    "only by the operator (${operator}); not by ${actor}"
)
OPERATOR_STEP_ONLY = (
    "step states, deadlines and escalations may be written only by the operator "
    "(${operator}); not by ${actor}"
)
WRITERS_ONLY = (
    "AgenticTask status may be written only by ${platform}, ${operator} and the task agent "
    "${agent}; not by ${actor}"
)
DECISION_FINAL = "a step decision, once written, cannot be changed or removed"
APPROVAL_FINAL = "a recorded approval cannot be changed or removed"
NEEDS_APPROVAL = "a step can have an execution only after an approving decision"
PLAN_IMMUTABLE = (
    "spec.steps: Forbidden: spec.steps is immutable: the plan cannot change after creation; "
    "create a new AgenticTask with spec.revisionOf instead"
)
ORG_MISMATCH = (
    "spec.orgId (${other_org}) must equal the humanwork.io/org-id label of namespace ${ns} (${org})"
)

REFUSALS = [
    # --- malformed plans, refused by the CRD schema and its CEL rules ------------------------
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.steps.1.risk", "extreme")),
            422,
            'spec.steps[1].risk: Unsupported value: "extreme": supported values: '
            '"low", "medium", "high", "critical"',
        ),
        id="create-unknown-risk-level",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.steps", [])),
            422,
            "spec.steps in body should have at least 1 items",
        ),
        id="create-no-steps",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(_duplicate_ids),
            422,
            'spec.steps[1]: Duplicate value: {"id":"fetch-orders"}',
        ),
        id="create-duplicate-step-ids",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(_many_steps),
            422,
            "spec.steps: Too many: 51: must have at most 50 items",
        ),
        id="create-too-many-steps",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.steps.0.kind", "script")),
            422,
            'spec.steps[0].kind: Unsupported value: "script"',
        ),
        id="create-unknown-step-kind",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(_one_option),
            422,
            "spec.steps[2].options: Invalid value: an input step with options offers at least "
            "two options",
        ),
        id="create-input-step-with-one-option",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(_options_on_action),
            422,
            "spec.steps[0].options: Invalid value: only input steps have options",
        ),
        id="create-options-on-an-action-step",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(_no_tool),
            422,
            "spec.steps[0].tool: Invalid value: an action step names the tool it calls",
        ),
        id="create-action-step-without-tool",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.policy", {"decisionDeadlineSeconds": 0})),
            422,
            "spec.policy.decisionDeadlineSeconds in body should be greater than or equal to 1",
        ),
        id="create-zero-decision-deadline",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.policy", {"decisionDeadlineSeconds": -60})),
            422,
            "spec.policy.decisionDeadlineSeconds in body should be greater than or equal to 1",
        ),
        id="create-negative-decision-deadline",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.policy", {"escalation": {"intervalSeconds": -5}})),
            422,
            "spec.policy.escalation.intervalSeconds in body should be greater than or equal to 1",
        ),
        id="create-negative-escalation-interval",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.policy", {"escalation": {"maxEscalations": -1}})),
            422,
            "spec.policy.escalation.maxEscalations in body should be greater than or equal to 0",
        ),
        id="create-negative-escalation-budget",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.policy", {"requiredApprovals": {"critical": 0}})),
            422,
            "spec.policy.requiredApprovals.critical in body should be greater than or equal to 1",
        ),
        id="create-zero-required-approvals",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.policy", {"autoApprove": ["low", "high"]})),
            422,
            "spec.policy.autoApprove: Invalid value: only low risk steps may be "
            "auto-approved; medium, high and critical steps always need a human decision",
        ),
        id="create-auto-approve-high-risk",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.agentRef.name", "Acme_Agent")),
            422,
            "spec.agentRef.name in body should match",
        ),
        id="create-agent-ref-not-a-dns-label",
    ),
    pytest.param(
        Refusal(
            "new",
            AGENT,
            create(put("spec.orgId", "acme")),
            422,
            "spec.orgId in body should match",
        ),
        id="create-org-id-not-a-uuid",
    ),
    # --- objects outside their org, refused by the org-id policy (every identity) ---------
    pytest.param(
        Refusal("new", AGENT, create(put("spec.orgId", OTHER_ORG)), 422, ORG_MISMATCH),
        id="create-task-org-id-not-the-namespace-label",
    ),
    pytest.param(
        Refusal("new", ADMIN, create(put("spec.orgId", OTHER_ORG)), 422, ORG_MISMATCH),
        id="create-task-org-id-not-the-namespace-label-as-cluster-admin",
    ),
    pytest.param(
        Refusal(
            # a cluster admin: an agent is refused there already for writing outside its
            # own namespace (test_identity.py), whichever policy answers first
            "new",
            ADMIN,
            create(_in_unlabelled),
            403,
            "namespace ${unlabelled} has no humanwork.io/org-id label, so it is not an org "
            "namespace",
        ),
        id="create-task-in-namespace-without-org-label",
    ),
    pytest.param(
        Refusal(
            "new",
            ADMIN,
            create(put("spec.orgId", OTHER_ORG)),
            422,
            ORG_MISMATCH,
            plural="agentinstances",
        ),
        id="create-agent-instance-org-id-not-the-namespace-label",
    ),
    pytest.param(
        Refusal(
            "new",
            ADMIN,
            create(_in_unlabelled),
            403,
            "namespace ${unlabelled} has no humanwork.io/org-id label",
            plural="agentinstances",
        ),
        id="create-agent-instance-in-namespace-without-org-label",
    ),
    # --- malformed AgentInstances ----------------------------------------------------------
    pytest.param(
        Refusal(
            "new",
            ADMIN,
            create(put("spec.token", {"ttlSeconds": 3600, "rotateBeforeSeconds": 3600})),
            422,
            "spec.token.rotateBeforeSeconds: Invalid value: token.rotateBeforeSeconds must be "
            "smaller than token.ttlSeconds",
            plural="agentinstances",
        ),
        id="create-agent-instance-rotation-window-not-below-ttl",
    ),
    pytest.param(
        Refusal(
            "new",
            ADMIN,
            create(put("metadata.name", "a" * 58)),
            422,
            "an AgentInstance name is a DNS label (lowercase letters, digits and '-', starting "
            "with a letter) of at most 57 characters",
            plural="agentinstances",
        ),
        id="create-agent-instance-name-too-long",
    ),
    pytest.param(
        Refusal(
            "new",
            ADMIN,
            create(put("spec.replicas", -1)),
            422,
            "spec.replicas in body should be greater than or equal to 0",
            plural="agentinstances",
        ),
        id="create-agent-instance-negative-replicas",
    ),
    pytest.param(
        Refusal(
            "new",
            ADMIN,
            create(put("spec.token", {"ttlSeconds": -1})),
            422,
            "spec.token.ttlSeconds in body should be greater than or equal to 300",
            plural="agentinstances",
        ),
        id="create-agent-instance-negative-token-ttl",
    ),
    # --- the plan is immutable (CEL transition rules) ---------------------------------------
    pytest.param(
        Refusal(
            "created",
            AGENT,
            spec_json_patch({"op": "replace", "path": "/spec/steps/1/risk", "value": "low"}),
            422,
            PLAN_IMMUTABLE,
        ),
        id="plan-step-risk-lowered-by-agent",
    ),
    pytest.param(
        Refusal(
            "created",
            AGENT,
            spec_json_patch(
                {"op": "replace", "path": "/spec/steps/1/parameters/skuCount", "value": 1400}
            ),
            422,
            PLAN_IMMUTABLE,
        ),
        id="plan-step-parameters-changed-by-agent",
    ),
    pytest.param(
        Refusal(
            "approved",
            ADMIN,
            spec_json_patch(
                {
                    "op": "add",
                    "path": "/spec/steps/-",
                    "value": {
                        "id": "refund-all",
                        "description": "Refund every October order",
                        "tool": "shopify_query",
                        "risk": "critical",
                    },
                }
            ),
            422,
            PLAN_IMMUTABLE,
        ),
        id="plan-step-added-by-cluster-admin",
    ),
    pytest.param(
        Refusal(
            "created",
            AGENT,
            spec_json_patch({"op": "remove", "path": "/spec/steps/0"}),
            422,
            PLAN_IMMUTABLE,
        ),
        id="plan-step-removed-by-agent",
    ),
    pytest.param(
        Refusal(
            "created",
            ADMIN,
            spec_merge({"spec": {"orgId": OTHER_ORG}}),
            422,
            "spec.orgId: Forbidden: spec.orgId is immutable",
        ),
        id="plan-org-id-changed",
    ),
    pytest.param(  # the revision loop (issue 14): a task cannot become another's revision
        Refusal(
            "created",
            ADMIN,
            spec_merge({"spec": {"revisionOf": "another-task"}}),
            422,
            "Forbidden: spec.revisionOf is immutable: a revision names the plan it revises "
            "when it is created",
        ),
        id="plan-revision-of-added",
    ),
    pytest.param(
        Refusal(
            "created",
            AGENT,
            spec_merge({"spec": {"agentRef": {"name": "acme-support"}}}),
            422,
            "spec.agentRef: Forbidden: spec.agentRef is immutable",
        ),
        id="plan-agent-ref-changed",
    ),
    pytest.param(
        Refusal(
            "created",
            AGENT,
            spec_merge({"spec": {"policy": {"autoApprove": ["low", "medium"]}}}),
            422,
            "spec.policy: Forbidden: spec.policy is immutable",
        ),
        id="plan-policy-changed",
    ),
    pytest.param(
        Refusal(
            "agent-instance",
            ADMIN,
            spec_merge({"spec": {"orgId": OTHER_ORG}}),
            422,
            "spec.orgId: Forbidden: spec.orgId is immutable",
            plural="agentinstances",
        ),
        id="agent-instance-org-id-changed",
    ),
    # --- who writes which part of the status (task-status-writers) ---------------------------
    pytest.param(
        Refusal(
            "pending",
            AGENT,
            with_step("fetch-orders", decision=fresh_decision()),
            403,
            PLATFORM_ONLY,
        ),
        id="decision-written-by-agent",
    ),
    pytest.param(
        Refusal(
            "pending",
            OPERATOR,
            status_merge(steps_with("fetch-orders", decision=fresh_decision())),
            403,
            PLATFORM_ONLY,
        ),
        id="decision-written-by-operator",
    ),
    pytest.param(
        Refusal(
            "pending",
            AGENT,
            with_step("fetch-orders", approvals=lambda obj: [fresh_decision()(obj)]),
            403,
            APPROVALS_PLATFORM_ONLY,
        ),
        id="approval-written-by-agent",
    ),
    pytest.param(
        Refusal(
            "approved",
            AGENT,
            with_step("fetch-orders", resolution=lambda obj: dict(FORGED_RESOLUTION)),
            403,
            RESOLUTION_PLATFORM_ONLY,
        ),
        id="resolution-written-by-agent",
    ),
    pytest.param(
        Refusal(
            "approved",
            OPERATOR,
            status_merge(
                steps_with("fetch-orders", resolution=lambda obj, entry: dict(FORGED_RESOLUTION))
            ),
            403,
            RESOLUTION_PLATFORM_ONLY,
        ),
        id="resolution-written-by-operator",
    ),
    pytest.param(
        Refusal(
            "approved",
            PLATFORM,
            # its whole part (a server-side apply drops what the manager owns but omits)
            with_step(
                "fetch-orders",
                approvals=current("fetch-orders", "approvals"),
                decision=current("fetch-orders", "decision"),
                execution=lambda obj: execution(),
            ),
            403,
            AGENT_ONLY,
        ),
        id="execution-written-by-platform",
    ),
    pytest.param(
        Refusal(
            "approved",
            OPERATOR,
            status_merge(
                steps_with("fetch-orders", execution=lambda obj, entry: execution("Succeeded"))
            ),
            403,
            AGENT_ONLY,
        ),
        id="execution-written-by-operator",
    ),
    pytest.param(
        Refusal(
            "executing",
            OPERATOR,
            status_remove("fetch-orders", "execution"),
            403,
            AGENT_ONLY,
        ),
        id="execution-removed-by-operator",
    ),
    pytest.param(
        Refusal(
            "approved",
            OTHER_AGENT,
            with_step("fetch-orders", execution=lambda obj: execution()),
            403,
            WRITERS_ONLY,
        ),
        id="execution-written-by-another-agent-of-the-org",
    ),
    pytest.param(
        Refusal(
            "pending",
            INTRUDER,
            status_merge(lambda obj: {"phase": "Cancelled"}),
            403,
            WRITERS_ONLY,
        ),
        id="status-written-by-unrelated-service-account",
    ),
    pytest.param(
        Refusal(
            "pending",
            PLATFORM,
            status_merge(lambda obj: {"phase": "Completed"}),
            403,
            OPERATOR_ONLY,
        ),
        id="phase-written-by-platform",
    ),
    pytest.param(
        Refusal(
            "executing",
            AGENT,
            status_merge(lambda obj: {"currentStep": "update-inventory"}),
            403,
            OPERATOR_ONLY,
        ),
        id="current-step-written-by-agent",
    ),
    pytest.param(
        Refusal(
            "pending",
            AGENT,
            status_merge(
                steps_with("fetch-orders", deadline="2099-01-01T00:00:00Z", escalations=0)
            ),
            403,
            OPERATOR_STEP_ONLY,
        ),
        id="step-deadline-pushed-back-by-agent",
    ),
    # --- what was decided stays decided (task-status-integrity, every identity) ---------------
    pytest.param(
        Refusal(
            "approved",
            PLATFORM,
            with_step(
                "fetch-orders",
                approvals=current("fetch-orders", "approvals"),
                decision=lambda obj: changed_verdict(
                    obj, status_steps(obj)[step_index(obj, "fetch-orders")]
                ),
            ),
            403,
            DECISION_FINAL,
        ),
        id="decision-overwritten-by-platform",
    ),
    pytest.param(
        Refusal(
            "approved",
            PLATFORM,
            status_remove("fetch-orders", "decision"),
            403,
            DECISION_FINAL,
        ),
        id="decision-removed-by-platform",
    ),
    pytest.param(
        Refusal(
            "step-rejected",
            ADMIN,
            status_merge(steps_with("fetch-orders", decision=None, approvals=None)),
            403,
            DECISION_FINAL,
        ),
        id="rejection-removed-by-cluster-admin",
    ),
    pytest.param(
        Refusal(
            "approved",
            PLATFORM,
            status_remove("fetch-orders", "approvals"),
            403,
            APPROVAL_FINAL,
        ),
        id="approval-removed-by-platform",
    ),
    pytest.param(
        Refusal(
            "pending",
            AGENT,
            with_step("fetch-orders", execution=lambda obj: execution()),
            403,
            NEEDS_APPROVAL,
        ),
        id="execution-without-a-decision",
    ),
    pytest.param(
        Refusal(
            "step-rejected",
            AGENT,
            with_step("fetch-orders", execution=lambda obj: execution()),
            403,
            NEEDS_APPROVAL,
        ),
        id="execution-of-a-rejected-step",
    ),
    pytest.param(
        Refusal(
            "pending",
            OPERATOR,
            with_step("refund-all", state=lambda obj: "Pending"),
            422,
            "status.steps may only name steps of spec.steps",
        ),
        id="status-names-a-step-not-in-the-plan",
    ),
    pytest.param(
        Refusal(
            "rejected",
            OPERATOR,
            status_merge(lambda obj: {"phase": "InProgress"}),
            403,
            "the task is Rejected, a terminal phase, which never changes",
        ),
        id="terminal-phase-changed-by-operator",
    ),
    pytest.param(
        Refusal(
            "rejected",
            ADMIN,
            status_merge(lambda obj: {"phase": None}),
            403,
            "the task is Rejected, a terminal phase, which never changes",
        ),
        id="terminal-phase-removed-by-cluster-admin",
    ),
    # --- malformed status, refused by the schema whoever writes it ------------------------------
    pytest.param(
        Refusal(
            "pending",
            OPERATOR,
            status_merge(lambda obj: {"phase": "Paused"}),
            422,
            'status.phase: Unsupported value: "Paused"',
        ),
        id="status-unknown-phase",
    ),
    pytest.param(
        Refusal(
            "pending",
            PLATFORM,
            with_step(
                "fetch-orders",
                decision=fresh_decision("edit", "alice@acme.example"),
            ),
            422,
            "status.steps[0].decision: Invalid value: an edit carries the amended parameters",
        ),
        id="edit-decision-without-parameters",
    ),
    pytest.param(
        Refusal(
            "pending",
            PLATFORM,
            with_step(
                "fetch-orders",
                decision=lambda obj: {**fresh_decision()(obj), "stepHash": "not-a-hash"},
            ),
            422,
            "stepHash in body should match '^[0-9a-f]{64}$'",
        ),
        id="decision-with-malformed-step-hash",
    ),
    pytest.param(
        Refusal(
            "approved",
            AGENT,
            with_step("fetch-orders", execution=lambda obj: {**execution(), "attempt": 0}),
            422,
            "attempt in body should be greater than or equal to 1",
        ),
        id="execution-attempt-zero",
    ),
]


def _fill(text: str, contract: Contract, actor: str) -> str:
    values = {k.replace("-", "_"): v for k, v in contract.placeholders().items()}
    values["other_org"] = OTHER_ORG
    values["actor"] = contract.usernames.get(actor, "")
    return Template(text).safe_substitute(values)


def _fill_body(body: Body, contract: Contract) -> Body:
    return dict(json.loads(_fill(json.dumps(body), contract, ADMIN)))


def _comparable(obj: Body) -> Body:
    """What a refused write must leave as it was. For a task: everything, down to the
    resourceVersion. For an AgentInstance: its spec and generation (its status and
    metadata are the operator's, and an operator another test module runs cluster-wide may
    be reconciling it at the same moment)."""
    if obj["kind"] == "AgentInstance":
        return {"generation": obj["metadata"].get("generation"), "spec": obj.get("spec")}
    return {
        "resourceVersion": obj["metadata"]["resourceVersion"],
        "generation": obj["metadata"].get("generation"),
        "spec": obj.get("spec"),
        "status": obj.get("status"),
    }


@pytest.mark.parametrize("case", REFUSALS)
def test_refused_and_nothing_written(case: Refusal, contract: Contract) -> None:
    actor = contract.as_(case.actor, case.plural)
    admin = contract.admin.of(case.plural)
    before: Body | None = None
    if case.start == "new":
        name = f"refused-{uuid.uuid4().hex[:6]}"
        make = task_body if case.plural == "agentictasks" else agent_instance_body
        target = make(name, contract.namespace, contract.org_id)
    elif case.start == "agent-instance":
        name = f"refused-{uuid.uuid4().hex[:6]}"
        admin.create(agent_instance_body(name, contract.namespace, contract.org_id))
        target = before = admin.get(name)
    else:
        name = start_task(contract, case.start, "refused")
        target = before = admin.get(name)

    with pytest.raises(client.ApiException) as refused:
        case.write(actor, copy.deepcopy(target), contract)
    status, message = api_error(refused.value)
    expected = _fill(case.message, contract, case.actor)
    assert expected in message, message
    assert status == case.status, message

    if before is None:
        # a refused create leaves no object behind, wherever it was aimed
        objects = client.CustomObjectsApi(contract.cluster.api)
        for namespace in (contract.namespace, contract.unlabelled_namespace):
            with pytest.raises(client.ApiException) as missing:
                admin.get(name, namespace)
            assert missing.value.status == 404
            leftovers = objects.list_namespaced_custom_object(
                GROUP, VERSION, namespace, case.plural
            )["items"]
            assert not [o for o in leftovers if o["metadata"]["name"] in (name, "a" * 58)]
    else:
        # a refused write leaves the object exactly as it was: not even a new resourceVersion
        assert _comparable(admin.get(name)) == _comparable(before)


def test_table_covers_every_kind_of_refusal() -> None:
    assert len(REFUSALS) >= 20
    messages = {p.values[0].message for p in REFUSALS}
    for required in (
        PLATFORM_ONLY,
        AGENT_ONLY,
        OPERATOR_ONLY,
        OPERATOR_STEP_ONLY,
        WRITERS_ONLY,
        DECISION_FINAL,
        APPROVAL_FINAL,
        NEEDS_APPROVAL,
        PLAN_IMMUTABLE,
        ORG_MISMATCH,
    ):
        assert required in messages


# --- positive controls ----------------------------------------------------------------------


def _managers(obj: Body) -> dict[str, str]:
    """Field manager -> the fields it owns on the status subresource (as JSON text)."""
    return {
        m["manager"]: json.dumps(m.get("fieldsV1", {}))
        for m in obj["metadata"].get("managedFields", [])
        if m.get("subresource") == "status"
    }


def test_each_writer_writes_its_own_part(contract: Contract) -> None:
    name = new_task(contract, "flow")
    admin = contract.admin

    waiting = Condition(
        type="AwaitingDecision",
        status=ConditionStatus.TRUE,
        reason="StepPending",
        message="fetch-orders waits for an expert",
        last_transition_time=now(),
    )
    ticked = operator_tick(contract, name, waiting)
    assert ticked["status"]["phase"] == "PendingApproval"
    assert ticked["status"]["currentStep"] == "fetch-orders"
    assert [(c["type"], c["status"]) for c in ticked["status"]["conditions"]] == [
        ("AwaitingDecision", "True")
    ]
    assert ticked["status"]["highestPendingRisk"] == "high"
    fetch = status_steps(ticked)[0]
    assert (fetch["id"], fetch["state"]) == ("fetch-orders", "Pending")
    assert fetch["deadline"] == ticked["status"]["nextDeadline"]

    decided = platform_decide(contract, name, "fetch-orders")
    fetch = status_steps(decided)[0]
    assert fetch["decision"]["verdict"] == "approve"
    assert fetch["decision"]["by"] == "alice@acme.example"
    assert fetch["approvals"] == [fetch["decision"]]
    # the platform's apply left the operator's fields alone
    assert fetch["state"] == "Pending" and fetch["deadline"] == ticked["status"]["nextDeadline"]
    assert decided["status"]["phase"] == "PendingApproval"

    agent_start(contract, name, "fetch-orders")
    finished = agent_finish(contract, name, "fetch-orders", {"orders": 1873})
    fetch = status_steps(finished)[0]
    assert fetch["execution"]["state"] == "Succeeded"
    assert fetch["execution"]["result"] == {"orders": 1873}
    assert fetch["decision"] == status_steps(decided)[0]["decision"]

    ticked = operator_tick(contract, name)
    assert ticked["status"]["phase"] == "PendingApproval"
    assert ticked["status"]["currentStep"] == "update-inventory"
    steps = {s["id"]: s for s in status_steps(ticked)}
    assert steps["fetch-orders"]["state"] == "Executed"
    assert steps["update-inventory"]["state"] == "Pending"

    platform_decide(contract, name, "update-inventory", by="bob@acme.example")
    agent_start(contract, name, "update-inventory")
    agent_finish(contract, name, "update-inventory", {"updated": 14})
    done = operator_tick(
        contract,
        name,
        waiting.model_copy(update={"status": ConditionStatus.FALSE, "reason": "Done"}),
    )
    assert done["status"]["phase"] == "Completed"
    assert [(c["type"], c["status"]) for c in done["status"]["conditions"]] == [
        ("AwaitingDecision", "False")
    ]
    assert "completedAt" in done["status"]
    assert [s["execution"]["state"] for s in status_steps(done)] == ["Succeeded", "Succeeded"]

    # three field managers, each owning its own part of the status
    owners = _managers(admin.get(name))
    assert set(owners) == {"humanwork-platform-api", f"{AGENT_NAME}-agent", "humanwork-operator"}
    assert '"f:decision"' in owners["humanwork-platform-api"]
    assert '"f:execution"' not in owners["humanwork-platform-api"]
    assert '"f:execution"' in owners[f"{AGENT_NAME}-agent"]
    assert '"f:decision"' not in owners[f"{AGENT_NAME}-agent"]
    assert '"f:phase"' in owners["humanwork-operator"]
    assert '"f:conditions"' in owners["humanwork-operator"]
    assert '"f:decision"' not in owners["humanwork-operator"]

    # and once Completed, the phase stays Completed even for the operator
    with pytest.raises(client.ApiException) as refused:
        contract.as_(OPERATOR).merge_status(name, {"phase": "InProgress"})
    assert (
        "the task is Completed, a terminal phase, which never changes"
        in api_error(refused.value)[1]
    )
    assert admin.get(name)["status"]["phase"] == "Completed"


def test_platform_writes_a_select_decision_on_an_input_step(contract: Contract) -> None:
    name = f"select-{uuid.uuid4().hex[:6]}"
    body = task_body(name, contract.namespace, contract.org_id)
    body["spec"]["steps"] = [
        {
            "id": "pick-warehouse",
            "description": "Which warehouse ships the replacement stock?",
            "kind": "input",
            "options": ["berlin", "leipzig"],
            "risk": "medium",
        }
    ]
    contract.as_(AGENT).create(body)
    operator_tick(contract, name)
    task = AgenticTask.from_wire(contract.admin.get(name))
    step = task.step("pick-warehouse")
    assert step is not None
    status = taskflow.decide(
        task,
        "pick-warehouse",
        taskflow.DecisionRequest(
            verdict="select",
            by="alice@acme.example",
            step_hash=taskflow.step_hash(step),
            idempotency_key="pick-1",
            selection="leipzig",
        ),
        now(),
        org=STRICT,
    )
    written = contract.as_(PLATFORM).apply_status(
        name, taskflow.owned_status(status, taskflow.Writer.PLATFORM_API)
    )
    assert status_steps(written)[0]["decision"]["selection"] == "leipzig"
    # the hash stored is the one of the step as the server keeps it
    assert status_steps(written)[0]["decision"]["stepHash"] == taskflow.step_hash(
        Step.from_wire(contract.admin.get(name)["spec"]["steps"][0])
    )


def _race(writes: list[Callable[[], object]]) -> list[object | client.ApiException]:
    """Run the writes at the same moment; each result is the response or the refusal."""
    barrier = threading.Barrier(len(writes))
    results: list[object | client.ApiException] = [None] * len(writes)

    def run(index: int) -> None:
        barrier.wait()
        try:
            results[index] = writes[index]()
        except client.ApiException as exc:
            results[index] = exc

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(writes))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.mark.parametrize("round_", range(3), ids=lambda r: f"round-{r}")
def test_concurrent_decisions_with_preconditions_one_wins_one_conflicts(
    contract: Contract, round_: int
) -> None:
    name = start_task(contract, "pending", "race")
    read = contract.admin.get(name)
    experts = ["alice@acme.example", "bob@acme.example"]
    verdicts = ["approve", "reject"]
    clients = [contract.cluster.client_for_token(contract.tokens[PLATFORM]) for _ in experts]
    try:
        writers = [Resources(api, contract.namespace, "humanwork-platform-api") for api in clients]

        def body_for(expert: int) -> Body:
            obj = copy.deepcopy(read)  # same resourceVersion for both: the precondition
            entry = next(s for s in obj["status"]["steps"] if s["id"] == "fetch-orders")
            made = decision(obj, "fetch-orders", verdicts[expert], experts[expert])
            entry["decision"] = made
            if verdicts[expert] == "approve":
                entry["approvals"] = [made]
            return obj

        bodies = [body_for(0), body_for(1)]
        results = _race(
            [lambda i=i: writers[i].replace_status(bodies[i]) for i in range(len(experts))]
        )
    finally:
        for api in clients:
            api.close()

    won = [i for i, r in enumerate(results) if isinstance(r, dict)]
    lost = [i for i, r in enumerate(results) if isinstance(r, client.ApiException)]
    assert len(won) == 1 and len(lost) == 1, results
    refusal = results[lost[0]]
    assert isinstance(refusal, client.ApiException)
    status, message = api_error(refusal)
    assert status == 409, message
    assert "the object has been modified" in message

    stored = contract.admin.get(name)
    fetch = next(s for s in stored["status"]["steps"] if s["id"] == "fetch-orders")
    assert fetch["decision"]["by"] == experts[won[0]]
    assert fetch["decision"]["verdict"] == verdicts[won[0]]
    # the loser, retrying on the fresh object, cannot overwrite the winner: no lost write
    retry = copy.deepcopy(stored)
    entry = next(s for s in retry["status"]["steps"] if s["id"] == "fetch-orders")
    entry["decision"] = decision(retry, "fetch-orders", verdicts[lost[0]], experts[lost[0]])
    with pytest.raises(client.ApiException) as again:
        contract.as_(PLATFORM).replace_status(retry)
    assert DECISION_FINAL in api_error(again.value)[1]
    assert (
        contract.admin.get(name)["metadata"]["resourceVersion"]
        == (stored["metadata"]["resourceVersion"])
    )


def test_concurrent_applied_decisions_without_preconditions_never_lose_one(
    contract: Contract,
) -> None:
    name = start_task(contract, "pending", "race-ssa")
    obj = contract.admin.get(name)
    experts = ["alice@acme.example", "bob@acme.example"]
    made = [decision(obj, "fetch-orders", "approve", expert) for expert in experts]
    clients = [contract.cluster.client_for_token(contract.tokens[PLATFORM]) for _ in experts]
    try:
        writers = [Resources(api, contract.namespace, "humanwork-platform-api") for api in clients]
        results = _race(
            [
                lambda i=i: writers[i].apply_status(
                    name,
                    {
                        "steps": [
                            {"id": "fetch-orders", "approvals": [made[i]], "decision": made[i]}
                        ]
                    },
                )
                for i in range(len(experts))
            ]
        )
    finally:
        for api in clients:
            api.close()
    won = [i for i, r in enumerate(results) if isinstance(r, dict)]
    lost = [i for i, r in enumerate(results) if isinstance(r, client.ApiException)]
    assert len(won) == 1 and len(lost) == 1, results
    refusal = results[lost[0]]
    assert isinstance(refusal, client.ApiException)
    status, message = api_error(refusal)
    # the second apply is re-evaluated against the first one's result and refused
    assert status == 403, message
    assert "cannot be changed or removed" in message
    fetch = next(
        s for s in contract.admin.get(name)["status"]["steps"] if s["id"] == "fetch-orders"
    )
    assert fetch["decision"] == made[won[0]]
    assert fetch["approvals"] == [made[won[0]]]
