"""Start and stop a real local Kubernetes control plane, for the tests and `make up`.

etcd, kube-apiserver (RBAC, service-account tokens, ValidatingAdmissionPolicy and
PodSecurity admission), kube-controller-manager, kube-scheduler and kwok (which
simulates one node so that pods are scheduled and reach Running) run as processes
in their own session, bound to 127.0.0.1, with their state, certificates, logs and
kubeconfigs in one folder (`.cluster/` by default). The binaries come from
`humanwork_dev/scripts/build.sh`, which builds them once per machine and caches them.

    humanwork-cluster up       # idempotent: reuses a running cluster
    humanwork-cluster status
    humanwork-cluster down     # stops it and removes its state
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import yaml

from humanwork_dev import pki

REPO = Path(__file__).resolve().parents[1]
BUILD_SCRIPT = REPO / "humanwork_dev" / "scripts" / "build.sh"
KWOK_STAGES = REPO / "humanwork_dev" / "scripts" / "kwok-stages.yaml"
DEFAULT_STATE = REPO / ".cluster"
NODE_NAME = "kwok-node-0"
SERVICE_CIDR = "10.96.0.0/16"
SERVICE_SUFFIXES = ("", ".default", ".default.svc", ".default.svc.cluster.local")
REAL_NODE_IP = "10.213.0.1"  # humanwork_dev.node.NODE_IP
ISSUER = "https://kubernetes.default.svc.cluster.local"


class ClusterError(RuntimeError):
    """The control plane could not be built, started or reached."""


@dataclass
class ClusterInfo:
    """What a running local control plane is, as written to `<state>/state.json`."""

    state_dir: str
    kubeconfig: str
    server: str
    bin_dir: str
    pids: dict[str, int]
    started_at: float
    ready_seconds: float
    phases: dict[str, float]

    @property
    def kubectl(self) -> str:
        return str(Path(self.bin_dir) / "kubectl")


def state_dir_default() -> Path:
    return Path(os.environ.get("HUMANWORK_CLUSTER_DIR", DEFAULT_STATE))


def binaries(build: bool = True) -> Path:
    """The folder with the cached binaries; builds them first when `build` is true."""
    args = [str(BUILD_SCRIPT)] + ([] if build else ["--print-bin"])
    done = subprocess.run(args, check=False, stdout=subprocess.PIPE, text=True)
    if done.returncode != 0:
        raise ClusterError(f"{BUILD_SCRIPT} failed (exit {done.returncode}); see its output above")
    return Path(done.stdout.strip().splitlines()[-1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _kubeconfig(path: Path, server: str, ca: Path, client: pki.Pair, user: str) -> Path:
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "humanwork-local",
                "cluster": {"server": server, "certificate-authority": str(ca)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {"client-certificate": str(client.cert), "client-key": str(client.key)},
            }
        ],
        "contexts": [
            {"name": "humanwork-local", "context": {"cluster": "humanwork-local", "user": user}}
        ],
        "current-context": "humanwork-local",
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def admin_http(state: Path) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(state / "pki" / "ca.crt"))
    ctx.load_cert_chain(str(state / "pki" / "admin.crt"), str(state / "pki" / "admin.key"))
    return httpx.Client(verify=ctx, timeout=5.0)


def status(state: Path | None = None) -> ClusterInfo | None:
    """The running cluster recorded in `state`, or None when none answers there."""
    state = state or state_dir_default()
    path = state / "state.json"
    if not path.exists():
        return None
    info = ClusterInfo(**json.loads(path.read_text()))
    if not all(_alive(pid) for pid in info.pids.values()):
        return None
    try:
        with admin_http(state) as c:
            if c.get(f"{info.server}/readyz").status_code != 200:
                return None
    except (httpx.HTTPError, ssl.SSLError, OSError):
        return None
    return info


def spawn(
    name: str, args: list[str], logs: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start a process in its own session, logging to `<logs>/<name>.log`."""
    log = (logs / f"{name}.log").open("ab")
    return subprocess.Popen(
        args,
        env={**os.environ, **(env or {})},
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )


def _wait(what: str, check: Any, timeout: float, procs: dict[str, subprocess.Popen[bytes]]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in procs.items():
            if p.poll() is not None:
                raise ClusterError(f"{name} exited with {p.returncode} while waiting for {what}")
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.2)
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}")


AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        # what humanwork's own identities do, to compare with the RBAC they are granted
        {"level": "Metadata", "userGroups": ["system:serviceaccounts:humanwork-system"]},
        {"level": "None"},
    ],
}


def _node_manifest() -> dict[str, Any]:
    resources = {"cpu": "2000", "memory": "8Ti", "pods": "5000"}  # room for 1,000s of agents
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": NODE_NAME,
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": NODE_NAME,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "type": "kwok",
            },
        },
        "status": {
            "allocatable": resources,
            "capacity": resources,
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "fake",
                "kubeProxyVersion": "fake",
                "containerRuntimeVersion": "kwok",
            },
        },
    }


@contextlib.contextmanager
def _exclusive(state: Path) -> Iterator[None]:
    """Serialise `up` and `down` on one state folder across processes (two test runs, or
    a test run and `make up`, must not both start a control plane there)."""
    state.parent.mkdir(parents=True, exist_ok=True)
    with state.with_name(state.name + ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def up(state: Path | None = None, timeout: float = 180.0) -> ClusterInfo:
    """Start the control plane (or return the running one) and wait until it is usable."""
    state = state or state_dir_default()
    with _exclusive(state):
        return _up(state, timeout)


@dataclass(frozen=True)
class _Plan:
    """What a new control plane starts from: folders, binaries, ports, identities, URLs."""

    state: Path
    bin_dir: Path
    ports: dict[str, int]
    ca: pki.Authority
    serving: pki.Pair
    kubelet_client: pki.Pair
    sa: pki.Pair
    kubeconfigs: dict[str, Path]
    server: str
    etcd_url: str


def _plan(state: Path, bin_dir: Path) -> _Plan:
    """The certificates of every component (and of the real node's, as the CA lives only
    here), free ports, and the kubeconfigs of the admin and the components."""
    ca = pki.Authority(state / "pki")
    # the address the in-cluster Service `kubernetes` points at: the real node's bridge
    # address (humanwork_dev.node forwards it to the loopback API server for pods); it
    # need not exist on the machine while only kwok runs
    serving = ca.issue(
        "apiserver",
        "kube-apiserver",
        server_names=("localhost", *(f"kubernetes{s}" for s in SERVICE_SUFFIXES)),
        server_ips=("127.0.0.1", "10.96.0.1", REAL_NODE_IP),
    )
    clients = {
        "admin": ca.issue("admin", "humanwork-admin", org="system:masters"),
        "controller-manager": ca.issue("controller-manager", "system:kube-controller-manager"),
        "scheduler": ca.issue("scheduler", "system:kube-scheduler"),
        "kwok": ca.issue("kwok", "kwok", org="system:masters"),
    }
    ca.issue("node", "system:node:humanwork-node-0", org="system:nodes")
    ca.issue("kube-proxy", "system:kube-proxy")
    # the API server's client identity at the real node's kubelet (exec, logs, port-forward)
    kubelet_client = ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
    ports = {n: free_port() for n in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")}
    server = f"https://127.0.0.1:{ports['apiserver']}"
    files = {"admin": "kubeconfig", "controller-manager": "controller-manager.kubeconfig"}
    files |= {"scheduler": "scheduler.kubeconfig", "kwok": "kwok.kubeconfig"}
    users = {"admin": "admin", "controller-manager": "kcm", "scheduler": "scheduler"}
    kubeconfigs = {
        name: _kubeconfig(state / files[name], server, ca.ca.cert, pair, users.get(name, name))
        for name, pair in clients.items()
    }
    sa = pki.service_account_keys(state / "pki")
    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    return _Plan(
        state, bin_dir, ports, ca, serving, kubelet_client, sa, kubeconfigs, server, etcd_url
    )


def _etcd_argv(plan: _Plan) -> list[str]:
    peer_url = f"http://127.0.0.1:{plan.ports['etcd-peer']}"
    return [
        str(plan.bin_dir / "etcd"),
        "--name=humanwork",
        f"--data-dir={plan.state / 'etcd'}",
        f"--listen-client-urls={plan.etcd_url}",
        f"--advertise-client-urls={plan.etcd_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=humanwork={peer_url}",
        "--unsafe-no-fsync=true",
        "--quota-backend-bytes=4294967296",
        "--log-level=warn",
    ]


def _apiserver_argv(plan: _Plan) -> list[str]:
    audit_policy = plan.state / "audit-policy.json"
    audit_policy.write_text(json.dumps(AUDIT_POLICY))
    return [
        str(plan.bin_dir / "kube-apiserver"),
        f"--etcd-servers={plan.etcd_url}",
        "--bind-address=127.0.0.1",
        f"--secure-port={plan.ports['apiserver']}",
        f"--advertise-address={REAL_NODE_IP}",
        f"--tls-cert-file={plan.serving.cert}",
        f"--tls-private-key-file={plan.serving.key}",
        f"--client-ca-file={plan.ca.ca.cert}",
        f"--kubelet-client-certificate={plan.kubelet_client.cert}",
        f"--kubelet-client-key={plan.kubelet_client.key}",
        # by address: a node name is not resolvable here (and no lookup should leave)
        "--kubelet-preferred-address-types=InternalIP",
        "--authorization-mode=Node,RBAC",
        "--enable-admission-plugins=NodeRestriction",
        f"--service-account-issuer={ISSUER}",
        f"--api-audiences={ISSUER}",
        f"--service-account-key-file={plan.sa.cert}",
        f"--service-account-signing-key-file={plan.sa.key}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        f"--cert-dir={plan.state / 'pki'}",
        "--profiling=false",
        f"--audit-policy-file={audit_policy}",
        f"--audit-log-path={plan.state / 'logs' / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-maxsize=200",
        "--event-ttl=1h",
        "--v=1",
    ]


def _controllers_argv(plan: _Plan) -> dict[str, list[str]]:
    """The controller manager's, the scheduler's and kwok's command lines."""
    kcm, sched = plan.kubeconfigs["controller-manager"], plan.kubeconfigs["scheduler"]
    return {
        "kube-controller-manager": [
            str(plan.bin_dir / "kube-controller-manager"),
            f"--kubeconfig={kcm}",
            f"--authentication-kubeconfig={kcm}",
            f"--authorization-kubeconfig={kcm}",
            f"--root-ca-file={plan.ca.ca.cert}",
            f"--service-account-private-key-file={plan.sa.key}",
            f"--cluster-signing-cert-file={plan.ca.ca.cert}",
            f"--cluster-signing-key-file={plan.ca.ca.key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=true",
            # client-side rate limits as kwok's own clusters set them: the defaults (20
            # QPS) make the controllers, not the operator, the bottleneck of a benchmark
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "--concurrent-deployment-syncs=10",
            "--concurrent-replicaset-syncs=10",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={plan.ports['kcm']}",
            "--controllers=*",
            "--v=1",
        ],
        "kube-scheduler": [
            str(plan.bin_dir / "kube-scheduler"),
            f"--kubeconfig={sched}",
            f"--authentication-kubeconfig={sched}",
            f"--authorization-kubeconfig={sched}",
            "--kube-api-qps=500",
            "--kube-api-burst=1000",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={plan.ports['scheduler']}",
            "--v=1",
        ],
        "kwok": [
            str(plan.bin_dir / "kwok"),
            f"--kubeconfig={plan.kubeconfigs['kwok']}",
            f"--config={KWOK_STAGES}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.244.0.1",
            "--node-lease-duration-seconds=40",
            f"--server-address=127.0.0.1:{plan.ports['kwok']}",
        ],
    }


def _api_get(plan: _Plan, path: str) -> httpx.Response:
    with admin_http(plan.state) as c:
        return c.get(f"{plan.server}{path}")


def _node_ready(plan: _Plan) -> bool:
    conds = _api_get(plan, f"/api/v1/nodes/{NODE_NAME}").json().get("status", {})
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conds.get("conditions", []))


def _start(
    plan: _Plan, timeout: float, procs: dict[str, subprocess.Popen[bytes]], mark: Any
) -> None:
    """Start the components in order, each waited for as the next needs it."""
    logs = plan.state / "logs"
    procs["etcd"] = spawn("etcd", _etcd_argv(plan), logs)
    etcd_health = f"{plan.etcd_url}/health"
    _wait("etcd", lambda: httpx.get(etcd_health, timeout=2).status_code == 200, 60, procs)
    mark("etcd")
    procs["kube-apiserver"] = spawn("kube-apiserver", _apiserver_argv(plan), logs)
    ready = lambda: _api_get(plan, "/readyz").status_code == 200  # noqa: E731
    _wait("kube-apiserver /readyz", ready, timeout, procs)
    mark("kube-apiserver")
    for name, argv in _controllers_argv(plan).items():
        procs[name] = spawn(name, argv, logs)
    subprocess.run(
        [str(plan.bin_dir / "kubectl"), "apply", "-f", "-"],
        input=json.dumps(_node_manifest()).encode(),
        env={**os.environ, "KUBECONFIG": str(plan.kubeconfigs["admin"])},
        check=True,
        stdout=subprocess.DEVNULL,
    )
    _wait("the kwok node to be Ready", lambda: _node_ready(plan), timeout, procs)
    mark("node")
    default_sa = "/api/v1/namespaces/default/serviceaccounts/default"
    made = lambda: _api_get(plan, default_sa).status_code == 200  # noqa: E731
    _wait("the default ServiceAccount (controller manager)", made, timeout, procs)
    mark("controllers")


def _up(state: Path, timeout: float) -> ClusterInfo:
    running = status(state)
    if running:
        return running
    _down(state)
    bin_dir = binaries(build=True)
    started = time.monotonic()
    for sub in ("logs", "pki", "etcd"):
        (state / sub).mkdir(parents=True, exist_ok=True)
    plan = _plan(state, bin_dir)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    phases: dict[str, float] = {}

    def mark(phase: str) -> None:
        phases[phase] = round(time.monotonic() - started, 2)

    try:
        _start(plan, timeout, procs, mark)
    except BaseException:
        for p in procs.values():
            stop_process(p.pid)
        raise
    info = ClusterInfo(
        state_dir=str(state),
        kubeconfig=str(plan.kubeconfigs["admin"]),
        server=plan.server,
        bin_dir=str(bin_dir),
        pids={name: p.pid for name, p in procs.items()},
        started_at=time.time(),
        ready_seconds=round(time.monotonic() - started, 2),
        phases=phases,
    )
    (state / "state.json").write_text(json.dumps(asdict(info), indent=2))
    return info


def stop_process(pid: int, grace: float = 10.0) -> None:
    """Stop a process group started by `spawn`: TERM, then KILL after `grace` seconds."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.1)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def down(state: Path | None = None) -> None:
    """Stop every process of the cluster recorded in `state` and remove the state."""
    state = state or state_dir_default()
    with _exclusive(state):
        _down(state)


def _down(state: Path) -> None:
    if (state / "node").exists():  # the real node first: its pods, mounts and iptables
        from humanwork_dev import node

        node._down(state)
    path = state / "state.json"
    if path.exists():
        with contextlib.suppress(ValueError, TypeError):
            pids = json.loads(path.read_text()).get("pids", {})
            # stop in reverse start order: kwok and controllers first, etcd last
            for pid in reversed(list(pids.values())):
                stop_process(int(pid))
    if state.exists():
        shutil.rmtree(state, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-cluster", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status", "env", "token-kubeconfig"])
    parser.add_argument(
        "args", nargs="*", help="token-kubeconfig: NAMESPACE SERVICEACCOUNT OUTPUT-PATH"
    )
    parser.add_argument("--state-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    state = args.state_dir or state_dir_default()
    try:
        if args.command == "up":
            info = up(state)
            print(
                f"local control plane ready at {info.server} ({info.ready_seconds}s)",
                file=sys.stderr,
            )
            print(f"export KUBECONFIG={info.kubeconfig}")
            print(f"export PATH={info.bin_dir}:$PATH")
        elif args.command == "down":
            down(state)
            print("local control plane stopped", file=sys.stderr)
        elif args.command == "token-kubeconfig":
            running = status(state)
            if not running or len(args.args) != 3:
                print(
                    "usage: humanwork-cluster token-kubeconfig NS SA PATH (cluster up)",
                    file=sys.stderr,
                )
                return 1
            namespace, account, out = args.args
            Path(out).parent.mkdir(parents=True, exist_ok=True)
            token_kubeconfig(running.kubeconfig, running.kubectl, namespace, account, Path(out))
            print(out)
        elif args.command in ("status", "env"):
            running = status(state)
            if not running:
                print("no local control plane is running", file=sys.stderr)
                return 1
            print(f"export KUBECONFIG={running.kubeconfig}")
            print(f"export PATH={running.bin_dir}:$PATH")
    except ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


def token_kubeconfig(
    admin_kubeconfig: str, kubectl: str, namespace: str, service_account: str, path: Path
) -> Path:
    """A kubeconfig that authenticates as `namespace/service_account` with a TokenRequest
    token (24 h), so a component runs under its own least-privilege identity."""
    env = {**os.environ, "KUBECONFIG": admin_kubeconfig}
    token = subprocess.run(
        [kubectl, "-n", namespace, "create", "token", service_account, "--duration=24h"],
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    admin = yaml.safe_load(Path(admin_kubeconfig).read_text())
    cluster = admin["clusters"][0]
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": service_account, "user": {"token": token}}],
        "contexts": [
            {
                "name": service_account,
                "context": {
                    "cluster": cluster["name"],
                    "user": service_account,
                    "namespace": namespace,
                },
            }
        ],
        "current-context": service_account,
    }
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path
