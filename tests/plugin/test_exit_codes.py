"""Issue 18: `kubectl humanwork` answers bad flags and bad server answers with its
documented exit codes (kubectl_humanwork/main.py), never a traceback.

The server is a real local HTTP server that answers every request with what the test
scripts: HTML instead of JSON, JSON of another shape, an empty body, 5xx with and without
the API's error body; a closed port stands for a platform that is not there. The plugin
runs in-process (`main`) and, for the entry point itself, as a process."""

from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kubectl_humanwork.main import main

DONE, REFUSED, USAGE, BULK_PARTIAL, UNREACHABLE, WATCH_TIMEOUT, BAD_ANSWER = 0, 1, 2, 3, 4, 5, 6
TOKEN = "token-0123456789"


@dataclass
class Answer:
    status: int
    content_type: str
    body: bytes


class Scripted:
    """A local HTTP server answering every request with `answer`; `seen` the paths."""

    def __init__(self) -> None:
        self.answer = Answer(200, "application/json", b"{}")
        self.seen: list[str] = []
        scripted = self

        class Handler(BaseHTTPRequestHandler):
            def _reply(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                scripted.seen.append(f"{self.command} {self.path}")
                answer = scripted.answer
                self.send_response(answer.status)
                self.send_header("Content-Type", answer.content_type)
                self.send_header("Content-Length", str(len(answer.body)))
                self.end_headers()
                self.wfile.write(answer.body)

            do_GET = do_POST = do_PUT = do_DELETE = _reply

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def answers(self, status: int, body: object, content_type: str = "application/json") -> None:
        raw = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.answer = Answer(status, content_type, raw)


@pytest.fixture(scope="module")
def scripted() -> Iterator[Scripted]:
    made = Scripted()
    made.thread.start()
    yield made
    made.server.shutdown()
    made.server.server_close()


@pytest.fixture
def server(scripted: Scripted) -> Scripted:
    """The module's server, answering `{}` and having seen nothing."""
    scripted.answers(200, {})
    scripted.seen.clear()
    return scripted


@dataclass
class Ran:
    code: int
    out: str
    err: str


def run(url: str | None, *argv: str, token: str | None = TOKEN) -> Ran:
    env = {"HUMANWORK_CONFIG": "/nonexistent/humanwork.json"}
    if url is not None:
        env["HUMANWORK_URL"] = url
    if token is not None:
        env["HUMANWORK_TOKEN"] = token
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), env=env, stdout=out, stderr=err)
    ran = Ran(code, out.getvalue(), err.getvalue())
    assert "Traceback" not in ran.out + ran.err, ran
    return ran


COMMANDS: list[tuple[str, ...]] = [
    ("queue",),
    ("show", "org-a/task-1"),
    ("show", "org-a/task-1/step-1"),
    ("approve", "org-a/task-1", "step-1"),
    ("reject", "org-a/task-1", "step-1", "--feedback", "no"),
    ("bulk", "approve", "org-a/task-1/step-1"),
    ("watch", "org-a/task-1", "--interval", "0.01", "--timeout", "1"),
    ("cancel", "org-a/task-1"),
    ("whoami",),
]


def _closed_port() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}"


@pytest.mark.parametrize(
    "argv",
    [
        (),
        ("nope",),
        ("queue", "--limit", "0"),
        ("queue", "--limit", "501"),
        ("queue", "--limit", "many"),
        ("queue", "--limit", "99999999999999999999999"),
        ("queue", "-o", "xml"),
        ("show", "just-a-name"),
        ("show", "a/b/c/d"),
        ("show", "a//c"),
        ("approve", "org-a/task-1"),
        ("approve", "org-a/task-1/step-1", "step-2"),
        ("reject", "org-a/task-1", "step-1"),
        ("reject", "org-a/task-1", "step-1", "--feedback", "   "),
        ("bulk", "approve", "org-a/task-1"),
        ("bulk", "reject", "org-a/task-1/step-1"),
        ("bulk", "maybe", "org-a/task-1/step-1"),
        ("watch", "org-a/task-1", "--interval", "0"),
        ("watch", "org-a/task-1", "--interval", "-1"),
        ("watch", "org-a/task-1", "--interval", "nan"),
        ("watch", "org-a/task-1", "--interval", "inf"),
        ("watch", "org-a/task-1", "--timeout", "-5"),
        ("watch", "org-a/task-1", "--timeout", "soon"),
        ("cancel", "org-a"),
    ],
)
def test_bad_flags_and_arguments_exit_2_without_calling(
    server: Scripted, argv: tuple[str, ...]
) -> None:
    ran = run(server.url, *argv)
    assert ran.code == USAGE, ran
    assert ran.err.strip(), "a usage error says what is wrong"
    assert server.seen == []


def test_help_exits_0() -> None:
    ran = run(None, "--help")
    assert ran.code == DONE and "Exit codes" in ran.out


@pytest.mark.parametrize(
    ("url", "token"),
    [
        (None, TOKEN),
        ("not a url", TOKEN),
        ("http://[::1", TOKEN),
        ("ftp://127.0.0.1:1", TOKEN),
        ("http://127.0.0.1:1", None),
        ("http://127.0.0.1:1", "two\nlines"),
        ("http://127.0.0.1:1", "tökén"),
        ("http://127.0.0.1:1", "with space"),
    ],
)
def test_configuration_errors_exit_2(url: str | None, token: str | None) -> None:
    ran = run(url, "queue", token=token)
    assert ran.code == USAGE, ran
    assert ran.err.startswith("error: "), ran


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
def test_a_refused_connection_exits_4(argv: tuple[str, ...]) -> None:
    ran = run(_closed_port(), *argv)
    assert ran.code == UNREACHABLE, ran
    assert "cannot reach the platform API" in ran.err


BAD_ANSWERS = {
    "html": (200, b"<html><body>Sign in to the proxy</body></html>", "text/html"),
    "not json": (200, b"{items: nope", "application/json"),
    "empty": (200, b"", "application/json"),
    "null": (200, b"null", "application/json"),
    "a list": (200, b"[1, 2]", "application/json"),
    "a string": (200, b'"ok"', "application/json"),
    "another object": (200, b'{"kind": "Status", "items": "x", "phase": 3}', "application/json"),
    "wrong types": (
        200,
        json.dumps(
            {
                "items": [{"id": 1}],
                "total": "many",
                "results": None,
                "phase": None,
                "username": None,
            }
        ).encode(),
        "application/json",
    ),
}


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize("answer", BAD_ANSWERS, ids=str)
def test_an_answer_that_is_not_the_apis_exits_6(
    server: Scripted, argv: tuple[str, ...], answer: str
) -> None:
    status, body, content_type = BAD_ANSWERS[answer]
    server.answers(status, body, content_type)
    ran = run(server.url, *argv)
    assert ran.code == BAD_ANSWER, ran
    assert ran.err.startswith("error: the platform API at"), ran


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: a[0])
@pytest.mark.parametrize(
    ("status", "body", "content_type", "said"),
    [
        (500, b"Internal Server Error", "text/plain", "HTTP 500"),
        (502, b"<html>Bad Gateway</html>", "text/html", "HTTP 502"),
        (503, b"", "text/plain", "HTTP 503"),
        (
            500,
            b'{"code": "internal_error", "message": "internal server error", "details": {}}',
            "application/json",
            "internal_error (HTTP 500)",
        ),
        (
            502,
            b'{"code": "kubernetes_error", "message": "refused", "details": {"status": 400}}',
            "application/json",
            "kubernetes_error (HTTP 502)",
        ),
        (404, b'{"detail": "Not Found"}', "application/json", "HTTP 404"),
    ],
    ids=["500-text", "502-html", "503-empty", "500-body", "502-body", "404-other"],
)
def test_a_server_error_exits_1_with_its_status_or_code(
    server: Scripted,
    argv: tuple[str, ...],
    status: int,
    body: bytes,
    content_type: str,
    said: str,
) -> None:
    server.answers(status, body, content_type)
    ran = run(server.url, *argv)
    assert ran.code == REFUSED, ran
    assert said in ran.err, ran


def test_the_entry_point_itself_never_prints_a_traceback(server: Scripted) -> None:
    """As a process: a bad flag, a bad answer to login, a closed port."""

    def plugin(*argv: str, url: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "kubectl_humanwork", *argv],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=60,
            env={"HUMANWORK_URL": url, "HUMANWORK_CONFIG": "/nonexistent/c.json", "PATH": ""},
            check=False,
        )

    server.answers(200, b"<html>login page</html>", "text/html")
    cases = [
        (plugin("queue", "--limit", "0", url=server.url), USAGE),
        (plugin("login", "-u", "x", "--password-stdin", url=server.url, stdin="pw\n"), BAD_ANSWER),
        (plugin("whoami", url=_closed_port()), USAGE),  # no token: configuration first
    ]
    server.answers(200, b'{"access_token": 5}', "application/json")
    cases.append(
        (plugin("login", "-u", "x", "--password-stdin", url=server.url, stdin="pw\n"), BAD_ANSWER)
    )
    for done, code in cases:
        assert "Traceback" not in done.stderr, done.stderr
        assert done.returncode == code, (done.args, done.returncode, done.stderr)
