"""`make up` and `make demo` as a newcomer runs them (`humanwork-stack`), on a control plane
of their own: everything comes up, the demo org's agent runs from its pod spec, the demo
task's plan waits in the review queue, running `up` again reuses what runs, and `down`
stops it all."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import httpx

OFFSET = 300  # ports 8300, 8380, ... beside a developer's own `make up`


def stack(state: Path, *args: str, timeout: float = 400) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "HUMANWORK_CLUSTER_DIR": str(state),
        "HUMANWORK_STACK_PORT_OFFSET": str(OFFSET),
    }
    env.pop("KUBECONFIG", None)
    return subprocess.run(
        [sys.executable, "-m", "humanwork_dev.stack", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_up_demo_and_down(tmp_path: Path) -> None:
    state = tmp_path / "stack"
    try:
        up = stack(state, "up", "--detach")
        assert up.returncode == 0, up.stderr[-3000:]
        assert f"http://127.0.0.1:{8000 + OFFSET}/workspace/tasks" in up.stderr
        assert "login expert / " in up.stderr
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
    finally:
        down = stack(state, "down")
        assert down.returncode == 0, down.stderr[-2000:]
    assert not state.exists() or not (state / "components.json").exists()
