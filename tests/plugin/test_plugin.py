"""`kubectl-humanwork` against the running platform API: every command, its JSON and YAML
output, its errors and exit codes."""

from __future__ import annotations

import contextlib
import io
import json
import os
import queue
import re
import stat
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from kubectl_humanwork.main import main
from tests.browser.support import STEP, Org, User

LOOK = {
    "id": "look",
    "description": "Look up order 1042",
    "kind": "action",
    "tool": "shopify_query",
    "parameters": {"order": 1042},
    "risk": "low",
}


@dataclass
class Ran:
    code: int
    out: str
    err: str


@pytest.fixture
def config(tmp_path: Path) -> Path:
    return tmp_path / "humanwork" / "config.json"


def run(org: Org, user: User | None, *argv: str, config: Path | None = None) -> Ran:
    env = {"HUMANWORK_URL": org.url, "HUMANWORK_CONFIG": str(config or "/nonexistent/c.json")}
    if user is not None:
        env["HUMANWORK_TOKEN"] = user.token
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env=env, stdout=out, stderr=err)
    return Ran(code, out.getvalue(), err.getvalue())


def test_queue_in_a_table_json_and_yaml(org: Org) -> None:
    later = org.task(policy={"decisionDeadlineSeconds": 7200})
    soon = org.task(policy={"decisionDeadlineSeconds": 300}, description="Refund order 7 now")

    table = run(org, org.expert, "queue")
    assert table.code == 0, table.err
    lines = table.out.splitlines()
    assert lines[0].split() == [
        "ID",
        "WORKFLOW",
        "KIND",
        "RISK",
        "STATUS",
        "DEADLINE",
        "AGE",
        "REQUEST",
    ]
    assert [line.split()[0] for line in lines[1:]] == [
        f"{soon['id']}/refund",
        f"{later['id']}/refund",
    ]
    assert "(soon)" in lines[1] and "Refund order 7 now" in lines[1]
    assert "pending" in lines[1] and "high" in lines[1] and "shop" in lines[1]

    as_json = run(org, org.expert, "queue", "-o", "json")
    page = json.loads(as_json.out)
    assert [i["task_id"] for i in page["items"]] == [soon["id"], later["id"]]
    assert page["pending_count"] == 2
    as_yaml = run(org, org.expert, "queue", "--output", "yaml")
    assert yaml.safe_load(as_yaml.out) == {**page, "items": yaml.safe_load(as_yaml.out)["items"]}
    assert [i["id"] for i in yaml.safe_load(as_yaml.out)["items"]] == [
        i["id"] for i in page["items"]
    ]

    empty = run(org, org.expert, "queue", "--org", org.id, "--limit", "1")
    assert empty.code == 0 and len(empty.out.splitlines()) == 2
    assert "showing 1 of 2" in empty.err


def test_show_a_task_and_a_human_task(org: Org) -> None:
    conversation = org.conversation(
        "The vase arrived broken",
        [("customer", "jane@example.com", "Call me on +44 20 7946 0958 please")],
    )
    made = org.task(steps=[LOOK, STEP], conversationId=conversation)
    task_id = made["id"]
    shown = run(org, org.viewer, "show", task_id)
    assert shown.code == 0, shown.err
    assert "Task:" in shown.out and task_id in shown.out
    assert "Request:" in shown.out and made["description"] in shown.out
    assert "Phase:" in shown.out and "PendingApproval" in shown.out
    plan = [line.split() for line in shown.out.splitlines() if line.startswith("  ")]
    assert plan[0][:6] == ["#", "STEP", "KIND", "TOOL", "RISK", "STATE"]
    assert plan[1][:6] == ["1", "look", "action", "shopify_query", "low", "Pending"]
    assert plan[2][:6] == ["2", "refund", "action", "shopify_refund", "high", "Pending"]
    assert 'parameters: {"amount": "49.90", "notify": true, "order": 1042}' in shown.out

    as_json = json.loads(run(org, org.viewer, "show", task_id, "-o", "json").out)
    assert as_json["id"] == task_id and as_json["spec"]["steps"][1]["id"] == "refund"

    detail = run(org, org.viewer, "show", f"{task_id}/look")
    assert detail.code == 0, detail.err
    assert f"Human task:   {task_id}/look" in detail.out
    assert "Status:       pending" in detail.out
    assert "Conversation: The vase arrived broken (redacted)" in detail.out
    assert "[email] (customer): Call me on [phone] please" in detail.out
    assert "jane@example.com" not in detail.out
    as_yaml = yaml.safe_load(run(org, org.viewer, "show", f"{task_id}/look", "-o", "yaml").out)
    assert as_yaml["id"] == f"{task_id}/look" and len(as_yaml["plan"]) == 2

    missing = run(org, org.viewer, "show", f"{org.namespace}/task-nope")
    assert missing.code == 1 and "error: not_found (HTTP 404)" in missing.err
    bad = run(org, org.viewer, "show", "just-a-name")
    assert bad.code == 2 and "expected NAMESPACE/NAME" in bad.err


def test_approve_and_reject_send_idempotency_keys(org: Org) -> None:
    made = org.task(steps=[LOOK, STEP])
    task_id = made["id"]
    # approving a step that is not yet decidable is refused with the API's code
    early = run(org, org.expert, "approve", task_id, "refund")
    assert early.code == 1 and "run_state_conflict (HTTP 409)" in early.err

    approved = run(org, org.expert, "approve", task_id, "look", "--idempotency-key", "k-0001")
    assert approved.code == 0, approved.err
    assert approved.out == f"approved {task_id}/look\n"
    decision = org.step_entry(task_id, "look")["decision"]
    assert (decision["by"], decision["idempotencyKey"]) == (org.expert.username, "k-0001")
    # the same key again is a replay, not a second decision
    again = run(org, org.expert, "approve", f"{task_id}/look", "--idempotency-key", "k-0001")
    assert again.code == 0 and "replayed" in again.out
    # a fresh key is a new decision attempt: refused, the step has its decision
    twice = run(org, org.expert, "approve", task_id, "look", "-o", "json")
    assert twice.code == 1 and "run_state_conflict" in twice.err

    org.record_execution(task_id, "look", {"order": 1042})
    org.wait(task_id, lambda t: t["current_step"] == "refund")
    no_feedback = run(org, org.expert, "reject", task_id, "refund")
    assert no_feedback.code == 2 and "--feedback" in no_feedback.err
    rejected = run(org, org.expert, "reject", task_id, "refund", "--feedback", "wrong order")
    assert rejected.code == 0, rejected.err
    assert rejected.out == f"rejected {task_id}/refund\n"
    decision = org.step_entry(task_id, "refund")["decision"]
    assert decision["verdict"] == "reject" and decision["feedback"] == "wrong order"
    assert decision["idempotencyKey"].startswith("kubectl-")

    # a critical step needs two experts: the first approval is recorded, not decisive
    critical = org.task(steps=[{**STEP, "risk": "critical"}])
    first = run(org, org.expert, "approve", critical["id"], "refund", "-o", "json")
    assert first.code == 0, first.err
    answer = json.loads(first.out)
    assert (answer["decided"], answer["approvals"], answer["required_approvals"]) == (False, 1, 2)
    second = run(org, org.expert2, "approve", f"{critical['id']}/refund")
    assert second.out == f"approved {critical['id']}/refund\n"
    # the viewer may not decide
    viewer = run(org, org.viewer, "approve", task_id, "look")
    assert viewer.code == 1 and "forbidden (HTTP 403)" in viewer.err


def test_an_expired_decision_fails_with_the_code_and_a_message(org: Org) -> None:
    made = org.task(
        policy={
            "decisionDeadlineSeconds": 1,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        }
    )
    org.wait(made["id"], lambda t: t["phase"] == "Expired")
    late = run(org, org.expert, "approve", made["id"], "refund")
    assert late.code == 1
    assert "error: human_task_expired (HTTP 410): " in late.err
    assert "can no longer be decided" in late.err
    assert late.out == ""


def test_bulk_reports_each_item_and_exits_3_on_failures(org: Org) -> None:
    fine = [org.task() for _ in range(2)]
    expired = org.task(
        policy={
            "decisionDeadlineSeconds": 1,
            "escalation": {"maxEscalations": 0},
            "onExpiry": "End",
        }
    )
    org.wait(expired["id"], lambda t: t["phase"] == "Expired")
    ids = [f"{fine[0]['id']}/refund", f"{expired['id']}/refund", f"{fine[1]['id']}/refund"]

    result = run(org, org.expert, "bulk", "approve", *ids)
    assert result.code == 3, result.err
    lines = result.out.splitlines()
    assert lines[0].split() == ["ID", "RESULT", "CODE", "MESSAGE"]
    assert lines[1].split()[:2] == [ids[0], "ok"]
    assert lines[2].split()[:3] == [ids[1], "failed", "human_task_expired"]
    assert "2 succeeded / 1 failed" in lines
    assert f"  human_task_expired: {ids[1]}" in lines

    rest = org.task()
    rejected = run(
        org, org.expert, "bulk", "reject", f"{rest['id']}/refund", "--feedback", "no", "-o", "json"
    )
    assert rejected.code == 0, rejected.err
    assert json.loads(rejected.out)["summary"] == "1 succeeded / 0 failed"
    assert run(org, org.expert, "bulk", "reject", ids[0]).code == 2  # no feedback
    assert run(org, org.expert, "bulk", "approve", "not-an-id").code == 2


def test_watch_prints_transitions_until_the_task_ends(org: Org) -> None:
    made = org.task(steps=[LOOK, STEP])
    task_id = made["id"]
    env = {
        **os.environ,
        "HUMANWORK_URL": org.url,
        "HUMANWORK_TOKEN": org.viewer.token,
        "HUMANWORK_CONFIG": "/nonexistent/c.json",
    }
    watcher = subprocess.Popen(
        [sys.executable, "-m", "kubectl_humanwork", "watch", task_id, "--interval", "0.3"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def read() -> None:
        assert watcher.stdout is not None
        for line in watcher.stdout:
            lines.put(line)

    def wait_for(text: str) -> None:
        deadline = time.monotonic() + 30
        while not any(text in line for line in seen):
            assert time.monotonic() < deadline, f"watch did not print {text!r}: {seen}"
            with contextlib.suppress(queue.Empty):
                seen.append(lines.get(timeout=0.5))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        wait_for(f"{task_id}  phase PendingApproval")
        r = org.http.post(
            f"/agentic/tasks/{task_id}/steps/look/approve", json={}, headers=org.expert.headers
        )
        assert r.status_code == 200, r.text
        wait_for("step look: Pending -> Approved")
        org.record_execution(task_id, "look", {"orders": 1})
        org.wait(task_id, lambda t: t["current_step"] == "refund")
        r = org.http.post(
            f"/agentic/tasks/{task_id}/steps/refund/reject",
            json={"feedback": "not now"},
            headers=org.expert.headers,
        )
        assert r.status_code == 200, r.text
        assert watcher.wait(timeout=60) == 0, watcher.stderr.read() if watcher.stderr else ""
        reader.join(10)
        while not lines.empty():
            seen.append(lines.get())
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    text = "".join(seen)
    assert f"step look: approve by {org.expert.username}" in text
    assert "step look: Approved -> Executed" in text
    assert 'step look execution: Succeeded (attempt 1) result {"orders": 1}' in text
    assert "step refund: Pending -> Rejected" in text
    assert f"step refund: reject by {org.expert.username} ('not now')" in text
    assert re.search(r"  phase \w+ -> Rejected\n", text), text
    # in order, one line per transition
    assert text.index("step look: Pending -> Approved") < text.index("step refund: reject")
    assert text.count("step look: approve by") == 1

    # -o json: one event per line; a task that already ended is printed and left at once
    ended = run(org, org.viewer, "watch", task_id, "-o", "json", "--interval", "0.1")
    assert ended.code == 0
    events = [json.loads(line) for line in ended.out.splitlines()]
    assert events[0] == {
        "at": events[0]["at"],
        "task": task_id,
        "kind": "phase",
        "from": None,
        "to": "Rejected",
    }
    assert {"kind": "decision", "step": "refund", "verdict": "reject"}.items() <= events[-1].items()

    # a watch that times out says so, with exit code 5
    waiting = org.task()
    timed = run(org, org.viewer, "watch", waiting["id"], "--interval", "0.2", "--timeout", "0.5")
    assert timed.code == 5 and "still PendingApproval" in timed.err


def test_login_writes_the_config_and_the_commands_use_it(org: Org, config: Path) -> None:
    env = {**os.environ, "HUMANWORK_CONFIG": str(config)}
    env.pop("HUMANWORK_TOKEN", None)
    env.pop("HUMANWORK_URL", None)
    done = subprocess.run(
        [
            "kubectl-humanwork"
            if os.path.exists(Path(sys.executable).parent / "kubectl-humanwork")
            else sys.executable,
            "login",
            "--url",
            org.url,
            "--username",
            org.expert.username,
            "--password-stdin",
        ],
        input=org.expert.password + "\n",
        env={**env, "PATH": f"{Path(sys.executable).parent}:{env.get('PATH', '')}"},
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert f"as {org.expert.username}" in done.stdout
    stored = json.loads(config.read_text())
    assert stored["url"] == org.url and stored["token"]
    assert stat.S_IMODE(config.stat().st_mode) == 0o600

    # no HUMANWORK_URL, no HUMANWORK_TOKEN: the config file is enough
    out, err = io.StringIO(), io.StringIO()
    code = main(["whoami"], env={"HUMANWORK_CONFIG": str(config)}, stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert "User:" in out.getvalue() and org.expert.username in out.getvalue()
    assert "run.control" in out.getvalue()

    wrong = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubectl_humanwork",
            "login",
            "--url",
            org.url,
            "-u",
            org.expert.username,
            "--password-stdin",
        ],
        input="not-the-password\n",
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert wrong.returncode == 1 and "unauthenticated (HTTP 401)" in wrong.stderr


def test_configuration_and_connection_errors(org: Org) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = main(["queue"], env={"HUMANWORK_CONFIG": "/nonexistent/c.json"}, stdout=out, stderr=err)
    assert code == 2 and "HUMANWORK_URL" in err.getvalue()
    code = main(
        ["queue"],
        env={"HUMANWORK_URL": org.url, "HUMANWORK_CONFIG": "/nonexistent/c.json"},
        stdout=out,
        stderr=err,
    )
    assert code == 2 and "HUMANWORK_TOKEN" in err.getvalue()
    bad_token = run(org, User("x", "x", "expert", "not-a-token"), "queue")
    assert bad_token.code == 1 and "unauthenticated (HTTP 401)" in bad_token.err
    err = io.StringIO()
    code = main(
        ["queue"],
        env={"HUMANWORK_URL": "http://127.0.0.1:9", "HUMANWORK_TOKEN": "t"},
        stdout=out,
        stderr=err,
    )
    assert code == 4 and "cannot reach the platform API" in err.getvalue()


def test_cancel_stops_a_task_and_needs_run_control(org: Org) -> None:
    made = org.task()
    refused = run(org, org.viewer, "cancel", made["id"])  # a viewer: no run.control
    assert refused.code == 1 and "error: forbidden (HTTP 403)" in refused.err
    done = run(org, org.lead, "cancel", made["id"], "-o", "json")
    assert done.code == 0, done.err
    assert json.loads(done.out)["id"] == made["id"]
    org.wait(made["id"], lambda t: t["phase"] == "Cancelled")
    again = run(org, org.lead, "cancel", made["id"])
    assert again.code == 1 and "run_state_conflict (HTTP 409)" in again.err
    wrong = run(org, org.lead, "cancel", f"{made['id']}/extra")
    assert wrong.code == 2 and "expected NAMESPACE/NAME" in wrong.err
