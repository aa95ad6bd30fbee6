"""How the plugin shows a task: its plan as a table and in detail, labelled fields, and
the events `watch` prints (what changed between two reads of a task)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TextIO

from kubectl_humanwork import output


def plan_rows(steps: list[dict[str, Any]]) -> list[list[Any]]:
    rows = []
    for n, step in enumerate(steps, 1):
        decision = step.get("decision")
        execution = step.get("execution")
        rows.append(
            [
                n,
                step["id"],
                step.get("kind", "action"),
                step.get("tool"),
                step["risk"],
                step.get("state") or "Pending",
                f"{decision['verdict']} by {decision['by']}" if decision else None,
                execution["state"] if execution else None,
            ]
        )
    return rows


def plan_details(steps: list[dict[str, Any]], out: TextIO) -> None:
    for step in steps:
        out.write(f"  {step['id']}: {step['description']}\n")
        if step.get("parameters"):
            out.write(f"    parameters: {output.pretty(step['parameters'])}\n")
        if step.get("options"):
            out.write(f"    options:    {', '.join(step['options'])}\n")
        decision = step.get("decision")
        if decision:
            line = f"{decision['verdict']} by {decision['by']} at {decision['at']}"
            out.write(f"    decision:   {line}\n")
            for key in ("feedback", "parameters", "input", "selection"):
                if decision.get(key) is not None:
                    value = decision[key]
                    text = value if isinstance(value, str) else output.pretty(value)
                    out.write(f"      {key}: {text}\n")
        execution = step.get("execution")
        if execution:
            out.write(f"    execution:  {execution['state']} (attempt {execution['attempt']})\n")
            result = execution.get("result_summary", execution.get("result"))
            if result is not None:
                out.write(f"      result: {output.pretty(result)}\n")
            if execution.get("error"):
                out.write(f"      error: {execution['error']}\n")


def fields(pairs: Sequence[tuple[str, Any]], out: TextIO) -> None:
    width = max(len(key) for key, _ in pairs) + 2
    for key, value in pairs:
        if value is None or value == "":
            continue
        out.write(f"{(key + ':').ljust(width)}{value}\n")


def plan_of_task(task: dict[str, Any]) -> list[dict[str, Any]]:
    """A TaskRead's steps joined with their status entries, shaped like the detail plan."""
    entries = {entry["id"]: entry for entry in task["status"].get("steps") or []}
    steps = []
    for step in task["spec"]["steps"]:
        entry = entries.get(step["id"], {})
        steps.append(
            {
                **step,
                "kind": step.get("kind", "action"),
                "state": entry.get("state"),
                "decision": entry.get("decision"),
                "execution": entry.get("execution"),
            }
        )
    return steps


def plan_table(plan: list[dict[str, Any]], out: TextIO) -> None:
    output.table(
        ["#", "STEP", "KIND", "TOOL", "RISK", "STATE", "DECISION", "EXECUTION"],
        plan_rows(plan),
        out,
        indent="  ",
    )


def events(before: dict[str, Any] | None, task: dict[str, Any]) -> list[dict[str, Any]]:
    """What changed between two reads of a task, as events."""
    events: list[dict[str, Any]] = []
    old_phase = before["phase"] if before else None
    if task["phase"] != old_phase:
        events.append({"kind": "phase", "from": old_phase, "to": task["phase"]})
    old_steps = {s["id"]: s for s in plan_of_task(before)} if before else {}
    for step in plan_of_task(task):
        old = old_steps.get(step["id"], {})
        state = step["state"] or "Pending"
        old_state = (old.get("state") or "Pending") if old else None
        if state != old_state:
            events.append({"kind": "step", "step": step["id"], "from": old_state, "to": state})
        decision, old_decision = step.get("decision"), old.get("decision")
        if decision and decision != old_decision:
            event = {
                "kind": "decision",
                "step": step["id"],
                "verdict": decision["verdict"],
                "by": decision["by"],
            }
            if decision.get("feedback"):
                event["feedback"] = decision["feedback"]
            events.append(event)
        run, old_run = step.get("execution") or {}, old.get("execution") or {}
        if run and (run.get("state"), run.get("attempt")) != (
            old_run.get("state"),
            old_run.get("attempt"),
        ):
            event = {
                "kind": "execution",
                "step": step["id"],
                "from": old_run.get("state"),
                "to": run["state"],
                "attempt": run.get("attempt"),
            }
            if run.get("result") is not None:
                event["result"] = run["result"]
            if run.get("error"):
                event["error"] = run["error"]
            events.append(event)
    return events


def event_line(event: dict[str, Any]) -> str:
    kind = event["kind"]
    arrow = f"{event['from']} -> {event['to']}" if event.get("from") else str(event.get("to"))
    if kind == "phase":
        return f"phase {arrow}"
    if kind == "step":
        return f"step {event['step']}: {arrow}"
    if kind == "decision":
        line = f"step {event['step']}: {event['verdict']} by {event['by']}"
        return line + (f" ({event['feedback']!r})" if event.get("feedback") else "")
    line = f"step {event['step']} execution: {arrow} (attempt {event.get('attempt')})"
    if "result" in event:
        line += f" result {output.pretty(event['result'])}"
    if event.get("error"):
        line += f" error {event['error']!r}"
    return line
