"""`make up` and `make demo` as a newcomer runs them (`humanwork-stack`), on a control plane
of their own: everything comes up, the demo org's agent runs from its pod spec, the demo
task's plan waits in the review queue, running `up` again reuses what runs, and `down`
stops it all."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from humanwork_dev import stack as stack_module
from humanwork_dev.processes import free_port
from tests.support import eventually

OFFSET = 300  # ports 8300, 8380, ... beside a developer's own `make up`


def stack_env(state: Path, offset: int) -> dict[str, str]:
    env = {
        **os.environ,
        "HUMANWORK_CLUSTER_DIR": str(state),
        "HUMANWORK_STACK_PORT_OFFSET": str(offset),
        # the process mode: the container mode's real node is tests/node's (one per machine)
        "HUMANWORK_STACK_AGENT_MODE": "process",
    }
    env.pop("KUBECONFIG", None)
    return env


def stack(
    state: Path, *args: str, timeout: float = 400, offset: int = OFFSET
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "humanwork_dev.stack", *args],
        env=stack_env(state, offset),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def refused(port: int) -> bool:
    """Nothing listens on the port any more."""
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _foreground_up(state: Path, offset: int = OFFSET) -> subprocess.Popen[str]:
    """`make up` in the foreground, read until it says it is up and waits."""
    foreground = subprocess.Popen(
        [sys.executable, "-m", "humanwork_dev.stack", "up"],
        env=stack_env(state, offset),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert foreground.stderr is not None
    lines: list[str] = []
    for line in foreground.stderr:
        lines.append(line)
        if line.startswith("running;"):
            break
    text = "".join(lines)
    assert "humanwork is up" in text, text[-3000:]
    assert f"http://127.0.0.1:{8000 + offset}/workspace/tasks" in text
    assert "login expert / " in text
    return foreground


def test_up_demo_and_down(tmp_path: Path) -> None:
    """One start of the whole stack, in the foreground as `make up` runs it: the demo on
    it, a second `up --detach` that reuses what runs and returns at once, and `make down`
    from another terminal, which the waiting foreground `up` notices and ends on."""
    state = tmp_path / "stack"
    foreground = _foreground_up(state)
    try:
        components = json.loads(stack(state, "status").stdout)["components"]
        assert components == {
            "operator": True,
            "platform": True,
            "fakes": True,
            "agent": True,
        }

        demo = stack(state, "demo", timeout=120)
        assert demo.returncode == 0, demo.stderr[-3000:]
        task = demo.stderr.split("planned ", 1)[1].split(":", 1)[0]

        base = f"http://127.0.0.1:{8000 + OFFSET}"
        password = (state / "expert-password").read_text().strip()
        token = httpx.post(
            f"{base}/auth/token", json={"username": "expert", "password": password}
        ).json()["access_token"]
        deadline = time.monotonic() + 30
        while True:
            queue = httpx.get(
                f"{base}/human-tasks", headers={"Authorization": f"Bearer {token}"}
            ).json()
            waiting = [i for i in queue["items"] if i["id"].startswith(task + "/")]
            if waiting or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert waiting, queue
        assert waiting[0]["risk"] == "low"  # step 1 of the seed's plan: read Amazon's orders
        # the demo agent looked the stores up while planning: step 2 is the exact correction
        plan = httpx.get(
            f"{base}/agentic/tasks/{task}", headers={"Authorization": f"Bearer {token}"}
        ).json()["spec"]["steps"]
        write = plan[-1]
        assert write["tool"] == "shopify" and write["risk"] in ("high", "critical")
        assert write["parameters"]["params"], write

        again = stack(state, "up", "--detach")  # idempotent: reuses what runs
        assert again.returncode == 0, again.stderr[-3000:]
        assert json.loads(stack(state, "status").stdout)["components"] == components

        down = stack(state, "down")  # from another terminal: the foreground `up` ends
        assert down.returncode == 0, down.stderr[-2000:]
        assert foreground.stderr is not None
        rest = foreground.stderr.read()
        assert foreground.wait(timeout=30) == 0
        assert "stopped from elsewhere" in rest, rest
    finally:
        if foreground.poll() is None:
            foreground.kill()
        stack(state, "down")
    assert not state.exists() or not (state / "components.json").exists()
    assert refused(8000 + OFFSET) and refused(8081 + OFFSET)


LISTEN = (
    "import socket, sys, time\n"
    "s = socket.socket(); s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen()\n"
    "time.sleep(600)\n"
)
"""A component that holds its port until it is stopped."""


def test_a_start_that_fails_part_way_stops_what_it_began(tmp_path: Path) -> None:
    """The issue's report: a `make up` that failed part-way left the platform and the
    fakes running, and `make down` missed them. Every start goes through `_Starts` (each
    component recorded the moment it is spawned) and a failure through `_aborted`: here with
    real processes holding their ports, the agent failing after three of them began."""
    state = tmp_path / "stack"
    (state / "logs").mkdir(parents=True)
    starts = stack_module._Starts(state)
    ports = {}
    for name in ("operator", "platform", "fakes"):
        port = free_port()
        starts.spawn(name, [sys.executable, "-c", LISTEN, str(port)], {}, (port,))
        eventually(lambda port=port: not refused(port), timeout=60)
        ports[name] = port
    assert set(json.loads((state / "components.json").read_text())) == set(ports)
    error = stack_module._aborted(starts, RuntimeError("the agent did not start"))
    assert "the agent did not start (stopped what this start began: fakes, platform, operator)" in (
        str(error)
    )
    assert json.loads((state / "components.json").read_text()) == {}
    for port in ports.values():
        assert refused(port), port


def test_a_taken_port_fails_the_start_at_once(
    tmp_path: Path,
) -> None:
    """The issue's report: the next `up` hit the ports of what a failed one left running;
    `make demo` too early raised a traceback. A taken port fails the start before anything
    starts, not even the control plane (a start that fails later: the test above; `make
    down` from another terminal reaching the foreground `up`: test_up_demo_and_down)."""
    state, offset = tmp_path / "stack", OFFSET + 20
    agent_port = 8081 + offset
    blocker = socket.socket()
    blocker.bind(("127.0.0.1", agent_port))
    blocker.listen()
    try:
        failed = stack(state, "up", "--detach", offset=offset, timeout=120)
        assert failed.returncode == 1, failed.stderr[-3000:]
        assert f"port {agent_port} (agent) is taken by another process" in failed.stderr
        assert "Traceback" not in failed.stderr
        assert json.loads(stack(state, "status", offset=offset).stdout) == {
            "cluster": None,
            "components": {},
        }
        for port in (8000 + offset, 8080 + offset, 8091 + offset, 8092 + offset):
            assert refused(port), port
        demo = stack(state, "demo", offset=offset, timeout=60)
        assert demo.returncode == 1 and "the stack is not ready" in demo.stderr, demo.stderr
        assert "Traceback" not in demo.stderr
    finally:
        blocker.close()
