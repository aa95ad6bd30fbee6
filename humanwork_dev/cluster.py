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


def _up(state: Path, timeout: float) -> ClusterInfo:
    running = status(state)
    if running:
        return running
    _down(state)
    bin_dir = binaries(build=True)
    started = time.monotonic()
    logs = state / "logs"
    for sub in ("logs", "pki", "etcd"):
        (state / sub).mkdir(parents=True, exist_ok=True)

    ca = pki.Authority(state / "pki")
    # the address the in-cluster Service `kubernetes` points at: the real node's bridge
    # address (humanwork_dev.node forwards it to the loopback API server for pods); it
    # need not exist on the machine while only kwok runs
    advertise = REAL_NODE_IP
    serving = ca.issue(
        "apiserver",
        "kube-apiserver",
        server_names=(
            "localhost",
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ),
        server_ips=("127.0.0.1", "10.96.0.1", advertise),
    )
    admin = ca.issue("admin", "humanwork-admin", org="system:masters")
    kcm = ca.issue("controller-manager", "system:kube-controller-manager")
    sched = ca.issue("scheduler", "system:kube-scheduler")
    kwok_cert = ca.issue("kwok", "kwok", org="system:masters")
    # the real node's identities (humanwork_dev.node), issued now as the CA lives only here
    ca.issue("node", "system:node:humanwork-node-0", org="system:nodes")
    ca.issue("kube-proxy", "system:kube-proxy")
    # the API server's client identity at the real node's kubelet (exec, logs, port-forward)
    kubelet_client = ca.issue("apiserver-kubelet-client", "kube-apiserver-kubelet-client")
    sa = pki.service_account_keys(state / "pki")

    ports = {n: free_port() for n in ("etcd", "etcd-peer", "apiserver", "kcm", "scheduler", "kwok")}
    server = f"https://127.0.0.1:{ports['apiserver']}"
    kubeconfig = _kubeconfig(state / "kubeconfig", server, ca.ca.cert, admin, "admin")
    kcm_kc = _kubeconfig(state / "controller-manager.kubeconfig", server, ca.ca.cert, kcm, "kcm")
    sched_kc = _kubeconfig(state / "scheduler.kubeconfig", server, ca.ca.cert, sched, "scheduler")
    kwok_kc = _kubeconfig(state / "kwok.kubeconfig", server, ca.ca.cert, kwok_cert, "kwok")

    etcd_url = f"http://127.0.0.1:{ports['etcd']}"
    peer_url = f"http://127.0.0.1:{ports['etcd-peer']}"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    phases: dict[str, float] = {}

    def mark(phase: str) -> None:
        phases[phase] = round(time.monotonic() - started, 2)

    try:
        procs["etcd"] = spawn(
            "etcd",
            [
                str(bin_dir / "etcd"),
                "--name=humanwork",
                f"--data-dir={state / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=humanwork={peer_url}",
                "--unsafe-no-fsync=true",
                "--quota-backend-bytes=4294967296",
                "--log-level=warn",
            ],
            logs,
        )
        _wait(
            "etcd",
            lambda: httpx.get(f"{etcd_url}/health", timeout=2).status_code == 200,
            60,
            procs,
        )
        mark("etcd")
        pkid = state / "pki"
        audit_policy = state / "audit-policy.json"
        audit_policy.write_text(json.dumps(AUDIT_POLICY))
        procs["kube-apiserver"] = spawn(
            "kube-apiserver",
            [
                str(bin_dir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['apiserver']}",
                f"--advertise-address={advertise}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={ca.ca.cert}",
                f"--kubelet-client-certificate={kubelet_client.cert}",
                f"--kubelet-client-key={kubelet_client.key}",
                # by address: a node name is not resolvable here (and no lookup should leave)
                "--kubelet-preferred-address-types=InternalIP",
                "--authorization-mode=Node,RBAC",
                "--enable-admission-plugins=NodeRestriction",
                f"--service-account-issuer={ISSUER}",
                f"--api-audiences={ISSUER}",
                f"--service-account-key-file={sa.cert}",
                f"--service-account-signing-key-file={sa.key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                f"--cert-dir={pkid}",
                "--profiling=false",
                f"--audit-policy-file={audit_policy}",
                f"--audit-log-path={logs / 'audit.log'}",
                "--audit-log-format=json",
                "--audit-log-maxsize=200",
                "--event-ttl=1h",
                "--v=1",
            ],
            logs,
        )
        with admin_http(state) as c:
            _wait(
                "kube-apiserver /readyz",
                lambda: c.get(f"{server}/readyz").status_code == 200,
                timeout,
                procs,
            )
        mark("kube-apiserver")
        procs["kube-controller-manager"] = spawn(
            "kube-controller-manager",
            [
                str(bin_dir / "kube-controller-manager"),
                f"--kubeconfig={kcm_kc}",
                f"--authentication-kubeconfig={kcm_kc}",
                f"--authorization-kubeconfig={kcm_kc}",
                f"--root-ca-file={ca.ca.cert}",
                f"--service-account-private-key-file={sa.key}",
                f"--cluster-signing-cert-file={ca.ca.cert}",
                f"--cluster-signing-key-file={ca.ca.key}",
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
                f"--secure-port={ports['kcm']}",
                "--controllers=*",
                "--v=1",
            ],
            logs,
        )
        procs["kube-scheduler"] = spawn(
            "kube-scheduler",
            [
                str(bin_dir / "kube-scheduler"),
                f"--kubeconfig={sched_kc}",
                f"--authentication-kubeconfig={sched_kc}",
                f"--authorization-kubeconfig={sched_kc}",
                "--kube-api-qps=500",
                "--kube-api-burst=1000",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={ports['scheduler']}",
                "--v=1",
            ],
            logs,
        )
        procs["kwok"] = spawn(
            "kwok",
            [
                str(bin_dir / "kwok"),
                f"--kubeconfig={kwok_kc}",
                f"--config={KWOK_STAGES}",
                "--manage-all-nodes=false",
                "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
                "--cidr=10.244.0.0/16",
                "--node-ip=10.244.0.1",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{ports['kwok']}",
            ],
            logs,
        )
        kubectl = str(bin_dir / "kubectl")
        env = {**os.environ, "KUBECONFIG": str(kubeconfig)}
        node = json.dumps(_node_manifest())
        subprocess.run(
            [kubectl, "apply", "-f", "-"],
            input=node.encode(),
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )

        def node_ready() -> bool:
            with admin_http(state) as c:
                doc = c.get(f"{server}/api/v1/nodes/{NODE_NAME}").json()
            conds = doc.get("status", {}).get("conditions", [])
            return any(x["type"] == "Ready" and x["status"] == "True" for x in conds)

        def default_sa() -> bool:
            with admin_http(state) as c:
                return (
                    c.get(f"{server}/api/v1/namespaces/default/serviceaccounts/default").status_code
                    == 200
                )

        _wait("the kwok node to be Ready", node_ready, timeout, procs)
        mark("node")
        _wait("the default ServiceAccount (controller manager)", default_sa, timeout, procs)
        mark("controllers")
    except BaseException:
        for p in procs.values():
            stop_process(p.pid)
        raise

    info = ClusterInfo(
        state_dir=str(state),
        kubeconfig=str(kubeconfig),
        server=server,
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
