"""`kubectl humanwork`: the review queue of the humanwork platform from the command line.

    kubectl humanwork queue                          decisions waiting, deadline first
    kubectl humanwork show NS/TASK[/STEP]            a task's plan, or one decision in detail
    kubectl humanwork approve NS/TASK STEP           approve a step
    kubectl humanwork reject NS/TASK STEP --feedback TEXT
    kubectl humanwork bulk approve|reject ID...      one decision for many (ID: NS/TASK/STEP)
    kubectl humanwork watch NS/TASK                  print the task's transitions as they happen
    kubectl humanwork cancel NS/TASK                 stop a task for good (run.control)
    kubectl humanwork login                          store a token in the config file
    kubectl humanwork whoami                         the caller's role, capabilities and orgs
    kubectl humanwork receipt verify FILE --keys KEYSET   check signed receipts offline

The platform API is `HUMANWORK_URL` (or --url) and the bearer token `HUMANWORK_TOKEN`, or
both from the config file `login` writes (~/.config/humanwork/config.json). Every decision
carries an Idempotency-Key (a fresh one, or --idempotency-key to make a retry safe).
Tables by default; `-o json` or `-o yaml` print the API's answer as it is.

Exit codes: 0 done; 1 the platform refused or failed (its error code, or the HTTP status
of an answer without one, is printed, e.g. human_task_expired); 2 usage or configuration
error (a bad flag or value, no URL or token, an unusable URL); 3 a bulk decision where some
items failed; 4 the platform could not be reached; 5 watch timed out; 6 the answer was not
the platform API's (not JSON, or another shape); 7 a receipt did not verify. Never a
traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import json
import math
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO
from urllib.parse import quote

import yaml

from kubectl_humanwork import output, plans, receipts
from kubectl_humanwork.client import (
    ApiError,
    BadAnswer,
    Client,
    ConfigError,
    PluginError,
    new_key,
    write_config,
)

TERMINAL_PHASES = {"Completed", "Rejected", "Failed", "Cancelled", "Expired"}
USAGE = 2
BULK_PARTIAL = 3
WATCH_TIMEOUT = 5


class Usage(PluginError):
    exit_code = 2


def _parts(task: str, want: Sequence[int]) -> list[str]:
    parts = task.strip("/").split("/")
    if len(parts) not in want or not all(parts):
        shapes = " or ".join(
            {2: "NAMESPACE/NAME", 3: "NAMESPACE/NAME/STEP"}[n] for n in sorted(want)
        )
        raise Usage(f"{task!r}: expected {shapes}")
    return parts


def _path(*parts: str) -> str:
    return "/".join(quote(part, safe="") for part in parts)


def _step_of(args: argparse.Namespace) -> tuple[str, str, str]:
    parts = _parts(args.task, (2, 3))
    if len(parts) == 3:
        if args.step and args.step != parts[2]:
            raise Usage(f"{args.task!r} names step {parts[2]!r}, not {args.step!r}")
        return parts[0], parts[1], parts[2]
    if not args.step:
        raise Usage("which step? give STEP, or TASK as NAMESPACE/NAME/STEP")
    return parts[0], parts[1], args.step


# --- commands ------------------------------------------------------------------------------


def cmd_queue(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    page = client.call(
        "GET", "/human-tasks", params={"org_id": args.org, "limit": args.limit, "offset": 0}
    )
    if args.output != "table":
        output.dump(page, args.output, out)
        return 0
    items = page["items"]
    if not items:
        err.write("No decisions waiting.\n")
        return 0
    now = datetime.now(UTC)
    rows = []
    for item in items:
        deadline = output.until(item["deadline"], now)
        if item["near_deadline"]:
            deadline += " (soon)" if not deadline.startswith("overdue") else ""
        rows.append(
            [
                item["id"],
                item["workflow"],
                item.get("kind", "action"),
                item["risk"],
                item["status"],
                deadline,
                output.age(item["age_seconds"]),
                output.clip(item["summary"], 48),
            ]
        )
    output.table(
        ["ID", "WORKFLOW", "KIND", "RISK", "STATUS", "DEADLINE", "AGE", "REQUEST"], rows, out
    )
    if page["total"] > len(items):
        err.write(f"showing {len(items)} of {page['total']} (use --limit)\n")
    return 0


def cmd_show(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    parts = _parts(args.task, (2, 3))
    if len(parts) == 3:
        detail = client.call("GET", f"/human-tasks/{_path(*parts)}")
        if args.output != "table":
            output.dump(detail, args.output, out)
        else:
            _show_human_task(detail, out)
        return 0
    task = client.call("GET", f"/agentic/tasks/{_path(*parts)}")
    if args.output != "table":
        output.dump(task, args.output, out)
    else:
        _show_task(task, out)
    return 0


def _deadline(value: str | None) -> str | None:
    return value and f"{value} ({output.until(value)})"


def _show_human_task(detail: dict[str, Any], out: TextIO) -> None:
    """One waiting decision: the request, the plan and the redacted conversation."""
    near = " (deadline near)" if detail["near_deadline"] else ""
    plans.fields(
        [
            ("Human task", detail["id"]),
            ("Request", detail["prompt"]),
            ("Workflow", detail["workflow"]),
            ("Requested by", detail["requested_by"]),
            ("Run", detail["run_id"]),
            ("Phase", detail["phase"]),
            ("Status", detail["status"] + near),
            ("Risk", detail["risk"]),
            ("Deadline", _deadline(detail["deadline"])),
            ("Escalations", detail["escalations"] or None),
            ("Archived", "yes" if detail["archived"] else None),
        ],
        out,
    )
    out.write("Plan:\n")
    plans.plan_table(detail["plan"], out)
    plans.plan_details(detail["plan"], out)
    conversation = detail.get("conversation")
    if conversation:
        out.write(f"Conversation: {conversation['subject']} (redacted)\n")
        for message in conversation["messages"]:
            text = message["content"].replace("\n", " ")
            out.write(
                f"  [{message['created_at']}] {message['author']} ({message['role']}): {text}\n"
            )


def _show_task(task: dict[str, Any], out: TextIO) -> None:
    """A task: its fields and its plan."""
    plans.fields(
        [
            ("Task", task["id"]),
            ("Request", task["description"]),
            ("Workflow", task["agent"]),
            ("Requested by", task["requested_by"]),
            ("Run", task["uid"]),
            ("Phase", task["phase"]),
            ("Current step", task["current_step"]),
            ("Next deadline", _deadline(task["next_deadline"])),
            ("Archived", "yes" if task.get("archived") else None),
        ],
        out,
    )
    plan = plans.plan_of_task(task)
    out.write("Plan:\n")
    plans.plan_table(plan, out)
    plans.plan_details(plan, out)


def _decide(client: Client, args: argparse.Namespace, verdict: str, out: TextIO) -> int:
    namespace, name, step = _step_of(args)
    body: dict[str, Any] = {}
    if args.feedback:
        body["feedback"] = args.feedback
    key = args.idempotency_key or new_key()
    answer = client.call(
        "POST",
        f"/agentic/tasks/{_path(namespace, name)}/steps/{_path(step)}/{verdict}",
        body=body,
        key=key,
    )
    if args.output != "table":
        output.dump(answer, args.output, out)
        return 0
    target = f"{namespace}/{name}/{step}"
    replayed = (
        " (replayed: already recorded with this idempotency key)" if answer["replayed"] else ""
    )
    if verdict == "reject":
        out.write(f"rejected {target}{replayed}\n")
    elif answer["decided"]:
        out.write(f"approved {target}{replayed}\n")
    else:
        out.write(
            f"approval recorded for {target}: {answer['approvals']} of "
            f"{answer['required_approvals']} required{replayed}\n"
        )
    return 0


def cmd_approve(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    return _decide(client, args, "approve", out)


def cmd_reject(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    if not args.feedback or not args.feedback.strip():
        raise Usage("reject needs --feedback (it goes back to the agent)")
    return _decide(client, args, "reject", out)


def cmd_cancel(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    namespace, name = _parts(args.task, (2,))
    answer = client.call("POST", f"/agentic/tasks/{_path(namespace, name)}/cancel")
    if args.output != "table":
        output.dump(answer, args.output, out)
        return 0
    out.write(
        f"cancel requested for {answer['id']} by {answer['requestedBy']}: "
        "the operator stops it now\n"
    )
    return 0


def cmd_bulk(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    for item in args.ids:
        _parts(item, (3,))
    if args.action == "reject" and not (args.feedback and args.feedback.strip()):
        raise Usage("bulk reject needs --feedback (it goes back to the agents)")
    body: dict[str, Any] = {"ids": args.ids, "action": args.action}
    if args.feedback:
        body["feedback"] = args.feedback
    result = client.call(
        "POST", "/human-tasks/bulk-resume", body=body, key=args.idempotency_key or new_key()
    )
    if args.output != "table":
        output.dump(result, args.output, out)
    else:
        output.table(
            ["ID", "RESULT", "CODE", "MESSAGE"],
            [
                [item["id"], "ok" if item["ok"] else "failed", item["code"], item["message"]]
                for item in result["results"]
            ],
            out,
        )
        out.write(f"{result['summary']}\n")
        for code, ids in result["failures"].items():
            out.write(f"  {code}: {', '.join(ids)}\n")
    return BULK_PARTIAL if result["failed"] else 0


def cmd_watch(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    parts = _parts(args.task, (2, 3))
    path = f"/agentic/tasks/{_path(parts[0], parts[1])}"
    task_id = f"{parts[0]}/{parts[1]}"
    deadline = time.monotonic() + args.timeout if args.timeout else None
    before: dict[str, Any] | None = None
    first = True
    while True:
        task = client.call("GET", path)
        for event in plans.events(before, task):
            at = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            if args.output == "json":
                out.write(json.dumps({"at": at, "task": task_id, **event}) + "\n")
            elif args.output == "yaml":
                out.write(yaml.safe_dump([{"at": at, "task": task_id, **event}], sort_keys=False))
            else:
                out.write(f"{at}  {task_id}  {plans.event_line(event)}\n")
        out.flush()
        before = task
        if task["phase"] in TERMINAL_PHASES:
            if first and args.output == "table":
                err.write(f"{task_id} already ended: {task['phase']}\n")
            return 0
        first = False
        if deadline is not None and time.monotonic() >= deadline:
            err.write(f"watch: {task_id} still {task['phase']} after {args.timeout}s\n")
            return WATCH_TIMEOUT
        time.sleep(args.interval)


def cmd_login(
    client: Client, args: argparse.Namespace, out: TextIO, err: TextIO, env: Mapping[str, str]
) -> int:
    username = args.username or input("Username: ").strip()
    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\n")
    else:
        password = getpass.getpass("Password: ")
    if not username or not password:
        raise Usage("login needs a username and a password")
    issued = client.call("POST", "/auth/token", body={"username": username, "password": password})
    path = write_config(
        env,
        {
            "url": client.url,
            "token": issued["access_token"],
            "username": username,
            "expires_at": issued["expires_at"],
        },
    )
    out.write(
        f"logged in to {client.url} as {username} until {issued['expires_at']}; "
        f"token stored in {path}\n"
    )
    return 0


def cmd_whoami(client: Client, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    me = client.call("GET", "/users/me")
    if args.output != "table":
        output.dump(me, args.output, out)
        return 0
    plans.fields(
        [
            ("User", me["username"]),
            ("Role", me["role"]),
            ("Capabilities", ", ".join(me["capabilities"]) or "-"),
            ("Orgs", ", ".join(f"{o['slug']} ({o['namespace']})" for o in me["orgs"]) or "-"),
        ],
        out,
    )
    return 0


# --- the command line ----------------------------------------------------------------------


def _count(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high`."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high}")
        return value

    return parse


def _seconds(minimum: float, *, inclusive: bool) -> Callable[[str], float]:
    """An argparse type: a finite number of seconds above (or at) `minimum`."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
        if not math.isfinite(value) or value < minimum or (value == minimum and not inclusive):
            bound = f"at least {minimum:g}" if inclusive else f"more than {minimum:g}"
            raise argparse.ArgumentTypeError(f"{text} seconds: must be {bound}")
        return value

    return parse


def _shared_options() -> tuple[argparse.ArgumentParser, argparse.ArgumentParser]:
    """The options every command has (output, URL), and those of decisions (the key)."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "-o",
        "--output",
        choices=output.FORMATS,
        default="table",
        help="table (default), json, yaml",
    )
    common.add_argument("--url", help="the platform API (default: HUMANWORK_URL or the config)")
    keyed = argparse.ArgumentParser(add_help=False)
    keyed.add_argument(
        "--idempotency-key",
        help="the decision's Idempotency-Key (default: a fresh one); reuse it to retry safely",
    )
    return common, keyed


def _decision_commands(
    sub: Any, common: argparse.ArgumentParser, keyed: argparse.ArgumentParser
) -> None:
    """approve, reject and bulk."""
    for name, helptext in (("approve", "approve a step"), ("reject", "reject a step")):
        cmd = sub.add_parser(name, parents=[common, keyed], help=helptext)
        cmd.add_argument("task", metavar="TASK", help="NAMESPACE/NAME (or NAMESPACE/NAME/STEP)")
        cmd.add_argument("step", metavar="STEP", nargs="?", help="the step's id")
        cmd.add_argument(
            "--feedback",
            help="a note for the agent" + (" (required)" if name == "reject" else ""),
        )
        cmd.set_defaults(run=cmd_approve if name == "approve" else cmd_reject)
    bulk = sub.add_parser(
        "bulk", parents=[common, keyed], help="one decision for many (NAMESPACE/NAME/STEP ids)"
    )
    bulk.add_argument("action", choices=("approve", "reject"))
    bulk.add_argument("ids", metavar="ID", nargs="+", help="NAMESPACE/NAME/STEP")
    bulk.add_argument("--feedback", help="required to reject")
    bulk.set_defaults(run=cmd_bulk)


def _task_commands(sub: Any, common: argparse.ArgumentParser) -> None:
    """queue, show, watch and cancel."""
    queue = sub.add_parser("queue", parents=[common], help="decisions waiting, deadline first")
    queue.add_argument("--org", help="only this org (its id)")
    queue.add_argument(
        "--limit", type=_count(1, 500), default=100, help="at most this many (1-500)"
    )
    queue.set_defaults(run=cmd_queue)

    show = sub.add_parser("show", parents=[common], help="a task, or one decision in detail")
    show.add_argument("task", metavar="TASK", help="NAMESPACE/NAME or NAMESPACE/NAME/STEP")
    show.set_defaults(run=cmd_show)

    watch = sub.add_parser(
        "watch", parents=[common], help="print a task's transitions as they happen"
    )
    watch.add_argument("task", metavar="TASK", help="NAMESPACE/NAME")
    watch.add_argument(
        "--interval",
        type=_seconds(0, inclusive=False),
        default=2.0,
        help="seconds between polls",
    )
    watch.add_argument(
        "--timeout",
        type=_seconds(0, inclusive=True),
        default=0,
        help="give up after this many seconds (default never)",
    )
    watch.set_defaults(run=cmd_watch)

    cancel = sub.add_parser("cancel", parents=[common], help="stop a task for good")
    cancel.add_argument("task", metavar="TASK", help="NAMESPACE/NAME")
    cancel.set_defaults(run=cmd_cancel)


def parser() -> argparse.ArgumentParser:
    common, keyed = _shared_options()
    top = argparse.ArgumentParser(
        prog="kubectl humanwork",
        description="The humanwork review queue: decide what AI agents may do.",
        epilog=(__doc__ or "").split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = top.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _task_commands(sub, common)
    _decision_commands(sub, common, keyed)

    login = sub.add_parser("login", parents=[common], help="store a token in the config file")
    login.add_argument("--username", "-u")
    login.add_argument(
        "--password-stdin", action="store_true", help="read the password from standard input"
    )
    login.set_defaults(run=None)

    whoami = sub.add_parser("whoami", parents=[common], help="your role, capabilities and orgs")
    whoami.set_defaults(run=cmd_whoami)
    receipts.add_commands(sub)
    return top


def main(
    argv: Sequence[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
) -> int:
    out, err = stdout or sys.stdout, stderr or sys.stderr
    environ = os.environ if env is None else env
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            args = parser().parse_args(argv)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else USAGE
    try:
        if args.command == "receipt":
            offline: int = args.offline(args, out, err)
            return offline
        return _run(args, environ, out, err)
    except ApiError as exc:
        err.write(f"error: {exc.message}\n")
        if exc.code == "human_task_expired":
            err.write("the decision deadline passed: this step can no longer be decided\n")
        elif exc.code == "unauthenticated":
            err.write("log in again: kubectl humanwork login (or set HUMANWORK_TOKEN)\n")
        return exc.exit_code
    except (ConfigError, PluginError) as exc:
        err.write(f"error: {exc.message}\n")
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def _run(args: argparse.Namespace, environ: Mapping[str, str], out: TextIO, err: TextIO) -> int:
    """Run the command; an answer of another shape than the API's is a `BadAnswer`."""
    if args.command == "login":
        client = Client.from_env(environ, args.url, need_token=False)
    else:
        client = Client.from_env(environ, args.url)
    try:
        if args.command == "login":
            return cmd_login(client, args, out, err, environ)
        code: int = args.run(client, args, out, err)
        return code
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        detail = f"{type(exc).__name__}: {exc}"
        raise BadAnswer(
            f"the platform API at {client.url} answered with something this plugin does not "
            f"understand ({detail[:200]}); is HUMANWORK_URL the platform API?"
        ) from None
