"""The whole local stack for `make up`: the control plane, the humanwork resources, the
operator and the platform API, and a demo org whose agent runs as a container on the
real node (the default) or as a local process.

    humanwork-stack up [--detach] [--agent-mode container|process]
                                   # idempotent; in the foreground until Ctrl-C, which
                                   # stops everything (--detach leaves it running)
    humanwork-stack demo           # the seed's example task, planned by the demo agent
    humanwork-stack status
    humanwork-stack down           # stops the components and the control plane

`--agent-mode container` (the default; root, containerd: humanwork_dev.node) starts the
real node and runs the product in-cluster as humanwork_dev.incluster deploys it
(the Helm chart with humanwork_dev/node-values.yaml, the objects of
`manifests/overlays/node`: the operator and the platform API as pods, the fakes as a pod,
the demo agent a container on the real node, the dev overlay's committed admin password);
the platform is forwarded to 127.0.0.1:8000. It is the default because it is how users
run the product: images, NetworkPolicy, Pod Security and volumes all real.

`--agent-mode process` (no root or no containerd needed; faster) runs everything as local
processes, as described below.
The operator authenticates with its ServiceAccount's token (so its RBAC is what runs),
the platform API with the humanwork-platform-api ServiceAccount's and an SQLite database
in `.cluster/` (its settings can be overridden with HUMANWORK_* variables, e.g.
HUMANWORK_ADMIN_PASSWORD or HUMANWORK_DATABASE_URL). The demo org `demo` (namespace
org-demo) has Shopify and Amazon enabled, pointed at local fake servers, an expert
`expert` (password in `.cluster/expert-password`) and the AgentInstance `agent`. Logs go
to `.cluster/logs/<component>.log`; the processes are recorded in
`.cluster/components.json`.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx

from humanwork_dev import cluster, crdwait, incluster, node
from humanwork_dev.demo import DEMO_CLIENT as DEMO_CLIENT
from humanwork_dev.demo import DEMO_EXPERT as DEMO_EXPERT
from humanwork_dev.demo import DEMO_NAMESPACE as DEMO_NAMESPACE
from humanwork_dev.demo import DEMO_SLUG as DEMO_SLUG
from humanwork_dev.demo import configure_agent, make_org
from humanwork_dev.fakes.catalog import SEED_REQUEST

PORT_OFFSET = int(os.environ.get("HUMANWORK_STACK_PORT_OFFSET", "0"))
"""Added to every port below, to run a second stack beside one (the stack's own test)."""
OPERATOR_HEALTH = 8080 + PORT_OFFSET
OPERATOR_METRICS = 9090 + PORT_OFFSET
PLATFORM_PORT = 8000 + PORT_OFFSET
AGENT_PORT = 8081 + PORT_OFFSET
SHOPIFY_PORT = 8091 + PORT_OFFSET
AMAZON_PORT = 8092 + PORT_OFFSET
PORTS = {
    "operator": (OPERATOR_HEALTH, OPERATOR_METRICS),
    "platform": (PLATFORM_PORT,),
    "fakes": (SHOPIFY_PORT, AMAZON_PORT),
    "agent": (AGENT_PORT,),
}
"""The loopback ports of each component of the process mode."""
AGENT_MODES = ("container", "process")
NO_NODE = (
    "the demo agent runs as a container on a real node, which needs root and containerd "
    "({reason}); `make up UP_ARGS=--agent-mode=process` runs it as a local process instead"
)
MANIFESTS = (
    "crds",
    "manifests/base/policies",
    "manifests/base/operator",
    "manifests/base/platform",
)


def _components(state: Path) -> dict[str, int]:
    path = state / "components.json"
    if not path.exists():
        return {}
    with contextlib.suppress(ValueError):
        return {k: int(v) for k, v in json.loads(path.read_text()).items()}
    return {}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _install(info: cluster.ClusterInfo) -> None:
    env = {**os.environ, "KUBECONFIG": info.kubeconfig}
    for path in MANIFESTS:
        subprocess.run(
            [info.kubectl, "apply", "-k", str(cluster.REPO / path)],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        if path == "crds":
            crdwait.wait_established(info.kubectl, info.kubeconfig)


def _platform(state: Path) -> tuple[str, ssl.SSLContext | bool]:
    """The platform's URL from this machine and what verifies it: in container mode HTTPS
    with the harness's platform CA (humanwork_dev.incluster), in process mode plain HTTP."""
    ca = state / "platform-ca.crt"
    if (state / "agent-mode").exists() and ca.exists():
        return f"https://127.0.0.1:{PLATFORM_PORT}", ssl.create_default_context(cafile=str(ca))
    return f"http://127.0.0.1:{PLATFORM_PORT}", True


def _wait_http(
    name: str, url: str, pid: int, timeout: float = 60.0, verify: ssl.SSLContext | bool = True
) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not _alive(pid):
            raise cluster.ClusterError(f"{name} exited; see .cluster/logs/{name}.log")
        with contextlib.suppress(httpx.HTTPError):
            if httpx.get(url, timeout=2, verify=verify).status_code == 200:
                return
        time.sleep(0.3)
    raise cluster.ClusterError(f"{name} did not answer {url} within {timeout:.0f}s")


class _Starts:
    """The components this `up` starts, recorded in `components.json` the moment each one
    is spawned (so `make down` finds them whatever happens next); on a failure, `abort`
    stops them again."""

    def __init__(self, state: Path) -> None:
        self.state = state
        self.running = {k: v for k, v in _components(state).items() if _alive(v)}
        self.started: list[str] = []

    def spawn(self, name: str, args: list[str], env: dict[str, str], ports: tuple[int, ...]) -> int:
        for port in ports:
            _check_port(port, name)
        proc = cluster.spawn(name, args, self.state / "logs", env=env)
        self.running[name] = proc.pid
        self.started.append(name)
        self.record()
        return proc.pid

    def record(self) -> None:
        (self.state / "components.json").write_text(json.dumps(self.running, indent=2))

    def abort(self) -> list[str]:
        stopped = list(reversed(self.started))
        for name in stopped:
            cluster.stop_process(self.running.pop(name))
        self.record()
        return stopped


def _check_port(port: int, name: str) -> None:
    """A clear error when another process holds a port a component needs."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise cluster.ClusterError(
                f"port {port} ({name}) is taken by another process: stop it (`make down` "
                "stops whatever an earlier `make up` left running) or set "
                "HUMANWORK_STACK_PORT_OFFSET"
            ) from None


def _check_ports_first(state: Path) -> None:
    """Every port of a component this start will begin, before anything starts: a taken
    one fails the start at once, not after the control plane and half the stack (each
    spawn checks its ports again)."""
    running = {k for k, v in _components(state).items() if _alive(v)}
    for name, ports in PORTS.items():
        if name not in running:
            for port in ports:
                _check_port(port, name)


def up(state: Path | None = None, agent_mode: str = "process") -> dict[str, str]:
    """Start whatever of the stack is not running; return what the user needs to know.
    A start that fails part-way stops the components it started and says why."""
    state = state or cluster.state_dir_default()
    if agent_mode == "container":
        return _up_container(state)
    _check_ports_first(state)
    info = cluster.up(state)
    _install(info)
    (state / "logs").mkdir(parents=True, exist_ok=True)
    starts = _Starts(state)
    try:
        password_file = _admin_password(state)
        _start_operator(starts, info)
        _start_platform(starts, info, password_file)
        _start_fakes(starts)
        expert_password = make_org(_platform(state), state, info, password_file.read_text().strip())
        _start_agent(starts, info)
    except (Exception, KeyboardInterrupt) as exc:
        raise _aborted(starts, exc) from exc
    return _summary(info, password_file, expert_password, _platform(state)[0])


def _aborted(starts: _Starts, exc: BaseException) -> cluster.ClusterError:
    """Stop what this start began; the error that says so."""
    stopped = starts.abort()
    note = f" (stopped what this start began: {', '.join(stopped)})" if stopped else ""
    return cluster.ClusterError(f"{exc}{note}; logs in {starts.state / 'logs'}")


def _summary(
    info: cluster.ClusterInfo, password_file: Path, expert_password: str, base: str
) -> dict[str, str]:
    """What the user needs to know of a started stack."""
    return {
        "kubeconfig": info.kubeconfig,
        "bin_dir": info.bin_dir,
        "platform": base,
        "workspace": f"{base}/workspace/tasks",
        "portal": f"{base}/portal",
        "admin_password_file": str(password_file),
        "expert_password": expert_password,
    }


def _node_missing() -> str | None:
    """Why the real node cannot run here (None: it can)."""
    if os.geteuid() != 0:
        return "this is not root"
    if not shutil.which("containerd") and not shutil.which("apt-get"):
        return "containerd is not installed and cannot be installed with apt-get"
    return None


def _up_container(state: Path) -> dict[str, str]:
    """The container mode: the real node, the product in-cluster, the demo org, its agent
    a container on the node, and a forward of 127.0.0.1:PLATFORM_PORT to the platform."""
    reason = _node_missing()
    if reason:
        raise cluster.ClusterError(NO_NODE.format(reason=reason))
    info = cluster.up(state)
    try:
        node.up(state)
    except node.NodeError as exc:
        raise cluster.ClusterError(NO_NODE.format(reason=f"the node did not start: {exc}")) from exc
    kubectl = incluster.Kubectl(info.kubectl, info.kubeconfig)
    try:
        deployed = incluster.deploy(kubectl)
    except incluster.InClusterError as exc:
        raise cluster.ClusterError(f"the product did not start on the real node: {exc}") from exc
    (state / "logs").mkdir(parents=True, exist_ok=True)
    (state / "agent-mode").write_text("container")
    password_file = state / "admin-password"
    password_file.write_text(incluster.DEV_ADMIN_PASSWORD)  # the dev overlay's (committed)
    password_file.chmod(0o600)
    (state / "fake-credentials.json").write_text(json.dumps(deployed.credentials))
    (state / "platform-ca.crt").write_bytes(deployed.ca_file.read_bytes())
    base, verify = _platform(state)
    starts = _Starts(state)
    try:
        if "platform-forward" not in starts.running:
            target = deployed.platform_url.removeprefix("https://")
            args = [sys.executable, "-m", "humanwork_dev.node", "forward",
                    f"127.0.0.1:{PLATFORM_PORT}", target]  # fmt: skip
            pid = starts.spawn("platform-forward", args, {}, (PLATFORM_PORT,))
            _wait_http("platform-forward", f"{base}/healthz", pid, verify=verify)
        expert_password = make_org(
            _platform(state), state, info, incluster.DEV_ADMIN_PASSWORD, on_real_node=True
        )
        _configure_agent_in_container(kubectl)
    except (Exception, KeyboardInterrupt) as exc:
        raise _aborted(starts, exc) from exc
    agent = f"{DEMO_NAMESPACE}/agent, a container on the real node {node.NODE_NAME}"
    return {**_summary(info, password_file, expert_password, base), "agent": agent}


CONFIGURE_IN_CONTAINER = """
import json, os, time, urllib.request
from humanwork_core import signing
key = open(os.environ["HUMANWORK_CALLBACK_SECRET_FILE"]).read().strip()
body = json.dumps({"planningLookups": True}).encode()
headers = {"Content-Type": "application/json",
           signing.SIGNATURE_HEADER: signing.sign(key, body, int(time.time()))}
request = urllib.request.Request("http://127.0.0.1:8080/v1/configure", body, headers)
print(urllib.request.urlopen(request, timeout=30).status)
"""


def _configure_agent_in_container(kubectl: incluster.Kubectl) -> None:
    """What `demo.configure_agent` does for a process, from inside the agent's container
    (its NetworkPolicy lets only the platform in): signed with the callback secret the
    container holds, so the secret never leaves it."""
    pods = kubectl.json("-n", DEMO_NAMESPACE, "get", "pods", "-l",
                        "app.kubernetes.io/name=humanwork-agent")  # fmt: skip
    running = [p for p in pods["items"] if p["status"].get("phase") == "Running"]
    if not running:
        raise cluster.ClusterError(f"the demo agent's pod is not running in {DEMO_NAMESPACE}")
    name = running[0]["metadata"]["name"]
    kubectl("-n", DEMO_NAMESPACE, "exec", name, "-c", "agent", "--", "python", "-c",
            CONFIGURE_IN_CONTAINER)  # fmt: skip


def _admin_password(state: Path) -> Path:
    password_file = state / "admin-password"
    if not password_file.exists():
        password_file.write_text(
            os.environ.get("HUMANWORK_ADMIN_PASSWORD") or secrets.token_urlsafe(18)
        )
        password_file.chmod(0o600)
    return password_file


def _start_operator(starts: _Starts, info: cluster.ClusterInfo) -> None:
    if "operator" in starts.running:
        return
    kubeconfig = cluster.token_kubeconfig(
        info.kubeconfig,
        info.kubectl,
        "humanwork-system",
        "humanwork-operator",
        starts.state / "operator.kubeconfig",
    )
    pid = starts.spawn(
        "operator",
        [
            sys.executable,
            "-m",
            "agent_operator",
            "--liveness",
            f"http://127.0.0.1:{OPERATOR_HEALTH}/healthz",
        ],
        {
            "KUBECONFIG": str(kubeconfig),
            "HUMANWORK_OPERATOR_METRICS_PORT": str(OPERATOR_METRICS),
            "HUMANWORK_OPERATOR_METRICS_ADDRESS": "127.0.0.1",
        },
        (OPERATOR_HEALTH, OPERATOR_METRICS),
    )
    _wait_http("operator", f"http://127.0.0.1:{OPERATOR_HEALTH}/healthz", pid)


def _start_platform(starts: _Starts, info: cluster.ClusterInfo, password_file: Path) -> None:
    state = starts.state
    (state / "agent-endpoints.json").write_text(
        json.dumps({f"{DEMO_NAMESPACE}/agent": f"http://127.0.0.1:{AGENT_PORT}"})
    )
    if "platform" in starts.running:
        return
    kubeconfig = cluster.token_kubeconfig(
        info.kubeconfig,
        info.kubectl,
        "humanwork-system",
        "humanwork-platform-api",
        state / "platform.kubeconfig",
    )
    env = {
        "HUMANWORK_KUBECONFIG": str(kubeconfig),
        "HUMANWORK_DATABASE_URL": os.environ.get(
            "HUMANWORK_DATABASE_URL", f"sqlite+aiosqlite:///{state / 'platform.db'}"
        ),
        "HUMANWORK_ADMIN_PASSWORD": password_file.read_text().strip(),
        "HUMANWORK_JWT_SECRET": _secret_file(state / "jwt-secret", 32),
        "HUMANWORK_CREDENTIALS_KEYS": json.dumps(
            {"local": _secret_file(state / "credentials-key", 32, b64=True)}
        ),
        "HUMANWORK_CREDENTIALS_ACTIVE_KEY": "local",
        # the demo agent runs as a local process, not behind its Service
        "HUMANWORK_AGENT_ENDPOINTS_FILE": str(state / "agent-endpoints.json"),
        # the fake Shopify and Amazon `make up` stores as the demo org's integrations
        "HUMANWORK_UPSTREAM_ALLOWED_ENDPOINTS": json.dumps(
            [f"127.0.0.1:{SHOPIFY_PORT}", f"127.0.0.1:{AMAZON_PORT}"]
        ),
    }
    args = [sys.executable, "-m", "platform_api.main", "serve", "--port", str(PLATFORM_PORT)]
    pid = starts.spawn("platform", args, env, (PLATFORM_PORT,))
    _wait_http("platform", f"http://127.0.0.1:{PLATFORM_PORT}/healthz", pid)


def _start_fakes(starts: _Starts) -> None:
    if "fakes" in starts.running:
        return
    credentials = starts.state / "fake-credentials.json"
    credentials.unlink(missing_ok=True)
    pid = starts.spawn(
        "fakes",
        [
            sys.executable,
            "-m",
            "humanwork_dev.fakes",
            "--shopify-port",
            str(SHOPIFY_PORT),
            "--amazon-port",
            str(AMAZON_PORT),
            "--credentials",
            str(credentials),
        ],
        {"PYTHONPATH": str(cluster.REPO)},
        (SHOPIFY_PORT, AMAZON_PORT),
    )
    deadline = time.monotonic() + 30
    while not credentials.exists():
        if not _alive(pid) or time.monotonic() > deadline:
            raise cluster.ClusterError("the fake upstreams did not start; see logs/fakes.log")
        time.sleep(0.2)


def _start_agent(starts: _Starts, info: cluster.ClusterInfo) -> None:
    if "agent" in starts.running:
        return
    pid = starts.spawn(
        "agent",
        [
            sys.executable,
            "-m",
            "humanwork_dev.runagent",
            f"{DEMO_NAMESPACE}/agent",
            "--platform-url",
            f"http://127.0.0.1:{PLATFORM_PORT}",
            "--port",
            str(AGENT_PORT),
        ],
        {"KUBECONFIG": info.kubeconfig},
        (AGENT_PORT,),
    )
    _wait_http("agent", f"http://127.0.0.1:{AGENT_PORT}/v1/health", pid)
    configure_agent(info, AGENT_PORT)


def _secret_file(path: Path, size: int, *, b64: bool = False) -> str:
    """A random secret kept in the state folder, so a restarted stack keeps its tokens
    and can still decrypt what it stored."""
    if not path.exists():
        raw = secrets.token_bytes(size)
        path.write_text(base64.b64encode(raw).decode() if b64 else raw.hex())
        path.chmod(0o600)
    return path.read_text().strip()


def demo(state: Path | None = None) -> dict[str, str]:
    """The admin asks the demo agent, through the platform API, to plan the seed's example;
    the plan then waits in the review queue for the expert."""
    state = state or cluster.state_dir_default()
    _require_ready(state)
    password = (state / "admin-password").read_text().strip()
    base, verify = _platform(state)
    with httpx.Client(base_url=base, timeout=90, verify=verify) as http:
        token = http.post("/auth/token", json={"username": "admin", "password": password})
        token.raise_for_status()
        admin = {"Authorization": f"Bearer {token.json()['access_token']}"}
        orgs = http.get("/orgs", headers=admin).json()
        items = orgs["items"] if isinstance(orgs, dict) else orgs
        org_id = next((o["id"] for o in items if o["slug"] == DEMO_SLUG), None)
        if org_id is None:
            raise cluster.ClusterError(NOT_READY)
        r = http.post(
            f"/orgs/{org_id}/agents/agent/tasks", json={"request": SEED_REQUEST}, headers=admin
        )
    if r.status_code != 201:
        raise cluster.ClusterError(f"the demo task was refused: {r.status_code} {r.text}")
    planned = r.json()
    return {"task": planned["id"], "summary": planned.get("summary", "")}


NOT_READY = "the stack is not ready: run `make up` and wait until it prints 'humanwork is up'"


def _require_ready(state: Path) -> None:
    """`make demo` before `make up` finished: say so instead of a traceback."""
    if cluster.status(state) is None or not (state / "admin-password").exists():
        raise cluster.ClusterError(NOT_READY)
    components = _components(state)
    container = (state / "agent-mode").exists()
    needed = ("platform-forward",) if container else ("operator", "platform", "fakes", "agent")
    missing = [name for name in needed if not components.get(name) or not _alive(components[name])]
    if missing:
        raise cluster.ClusterError(f"{NOT_READY} (not running: {', '.join(missing)})")


def down(state: Path | None = None) -> None:
    """Stop the components, then the control plane (which removes the state)."""
    state = state or cluster.state_dir_default()
    for pid in _components(state).values():
        cluster.stop_process(pid)
    cluster.down(state)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-stack", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status", "demo"])
    parser.add_argument(
        "--detach", action="store_true", help="up: leave it running and return at once"
    )
    parser.add_argument(
        "--agent-mode",
        choices=AGENT_MODES,
        default=os.environ.get("HUMANWORK_STACK_AGENT_MODE", "container"),
        help="up: the demo agent as a container on the real node (default; root) or as a "
        "local process (default from HUMANWORK_STACK_AGENT_MODE)",
    )
    args = parser.parse_args(argv)
    state = cluster.state_dir_default()
    try:
        if args.command == "up":
            out = up(state, args.agent_mode)
            agent = out.get("agent", f"{DEMO_NAMESPACE}/agent at http://127.0.0.1:{AGENT_PORT}")
            print(
                "humanwork is up.\n"
                f"  workspace:    {out['workspace']}  (login {DEMO_EXPERT} / "
                f"{out['expert_password']})\n"
                f"  portal:       {out['portal']}  (the demo org's client: login "
                f"{DEMO_CLIENT}, password in .cluster/client-password)\n"
                f"  platform API: {out['platform']}/docs  (user admin, password in "
                f"{out['admin_password_file']})\n"
                f"  demo agent:   {agent}\n"
                "  next:         `make demo` files the seed's example task\n"
                '  kubectl:      eval "$(.venv/bin/humanwork-cluster env)"',
                file=sys.stderr,
            )
            print(f"export KUBECONFIG={out['kubeconfig']}")
            print(f"export PATH={out['bin_dir']}:$PATH", flush=True)
            if not args.detach:
                _foreground(state)
        elif args.command == "demo":
            out = demo(state)
            print(
                f"planned {out['task']}: {out['summary']}\n"
                f"open {_platform(state)[0]}/workspace/tasks to decide",
                file=sys.stderr,
            )
        elif args.command == "down":
            down(state)
            print("humanwork stack stopped", file=sys.stderr)
        else:
            info = cluster.status(state)
            comps = {k: _alive(v) for k, v in _components(state).items()}
            print(json.dumps({"cluster": info.server if info else None, "components": comps}))
            return 0 if info and comps and all(comps.values()) else 1
    except (cluster.ClusterError, subprocess.CalledProcessError, httpx.HTTPError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _foreground(state: Path) -> None:
    """Wait until Ctrl-C (or SIGTERM), then stop everything cleanly."""
    stopping = False

    def stop(*_: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    print("running; Ctrl-C stops everything", file=sys.stderr, flush=True)
    while not stopping:
        time.sleep(0.5)
        if not (state / "components.json").exists():
            print("stopped from elsewhere (`make down`)", file=sys.stderr, flush=True)
            return
        dead = [k for k, v in _components(state).items() if not _alive(v)]
        if dead:
            print(
                f"stopped unexpectedly: {', '.join(dead)} (see {state / 'logs'}/)",
                file=sys.stderr,
            )
            break
    print("stopping ...", file=sys.stderr, flush=True)
    down(state)
    print("humanwork stack stopped", file=sys.stderr)


if __name__ == "__main__":
    raise SystemExit(main())
