"""Start and stop one real node beside the kwok node of the local control plane.

The node runs real containers: containerd (Debian's) with runc behind an OCI wrapper
(`oom-wrapper.sh`: root here lacks CAP_SYS_RESOURCE, so the negative oom_score_adj the
kubelet gives pod sandboxes is rewritten to 0), a CNI bridge with host-local addresses on
a private /24 that exists only on this machine, the kubelet and kube-proxy (iptables mode)
from the control plane's own Kubernetes module, CoreDNS for cluster DNS, and kube-router
in firewall-only mode to enforce NetworkPolicy. Everything runs as host processes in
their own sessions; state, configs and logs live under `<cluster state>/node/`.

Network safety: before containerd starts, `guard_up` adds this module's own nftables table
(`inet humanwork_guard`, which nothing else on the machine writes): a base chain on the
forward hook at priority -400, earlier than any chain iptables makes through either of
its backends, drops whatever comes from the pod range and is not for the pod range or a
local address, so no packet from a pod leaves the machine even when a NetworkPolicy does
not drop it; a base chain on the output hook, after the DNAT of Service addresses, drops
host packets DNATed from a Service address to a non-local address (a Service whose
endpoints are kwok's invented pod addresses). A drop in any base chain is final, so no
rule of kube-proxy, kube-router or anything else, in whatever chain, position or iptables
backend, lets such a packet through, and no resync of theirs moves the guard. Nothing
else of the host's firewall or routes is changed; `down` removes exactly what `up` added.

The node offers local PersistentVolumes (directories under `<cluster state>/node/volumes/`,
node affinity to the real node) for the claims named in VOLUMES: the platform's SQLite
file outlives its pod.

The node is tainted `humanwork.dev/real-node:NoSchedule`: only pods that tolerate it (and
select `humanwork.dev/node=real`) run there; everything else stays on kwok.

    humanwork-node up | down | status | restart COMPONENT
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from humanwork_dev import cluster
from humanwork_dev.nodeconfig import write_configs as write_configs
from humanwork_dev.nodenet import BRIDGE as BRIDGE
from humanwork_dev.nodenet import FORWARD_PRIORITY as FORWARD_PRIORITY
from humanwork_dev.nodenet import FORWARD_RULE as FORWARD_RULE
from humanwork_dev.nodenet import GUARD_TABLE as GUARD_TABLE
from humanwork_dev.nodenet import GUARDED as GUARDED
from humanwork_dev.nodenet import NODE_IP as NODE_IP
from humanwork_dev.nodenet import NODE_NAME as NODE_NAME
from humanwork_dev.nodenet import OUTPUT_PRIORITY as OUTPUT_PRIORITY
from humanwork_dev.nodenet import OUTPUT_RULE as OUTPUT_RULE
from humanwork_dev.nodenet import PAUSE_IMAGE as PAUSE_IMAGE
from humanwork_dev.nodenet import POD_CIDR as POD_CIDR
from humanwork_dev.nodenet import NodeError as NodeError
from humanwork_dev.nodenet import guard_down as guard_down
from humanwork_dev.nodenet import guard_holds as guard_holds
from humanwork_dev.nodenet import guard_up as guard_up
from humanwork_dev.nodenet import node_dir as node_dir
from humanwork_dev.nodenet import run as _run

REPO = cluster.REPO
BUILD_SCRIPT = REPO / "humanwork_dev" / "scripts" / "build-node.sh"
PACKAGES_SCRIPT = REPO / "humanwork_dev" / "scripts" / "node-packages.sh"
IMAGES_SCRIPT = REPO / "humanwork_dev" / "scripts" / "images.sh"
CACHE = Path(os.environ.get("HUMANWORK_CACHE", Path.home() / ".cache" / "humanwork"))
TAINT_KEY = "humanwork.dev/real-node"
LABEL = ("humanwork.dev/node", "real")


# --- images ---------------------------------------------------------------------------------


def _ctr(d: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return _run("ctr", "--address", str(d / "containerd.sock"), "-n", "k8s.io", *args, check=check)


def pause_archive() -> Path:
    """The pause image as a docker archive, built once per machine from the pause.c that
    ships in the k8s.io/kubernetes module (gcc -static, then buildah from scratch)."""
    out = CACHE / "images" / "archives" / "pause.tar"
    if out.exists():
        return out
    gomod = _run("go", "env", "GOMODCACHE").stdout.strip()
    source = Path(gomod) / "k8s.io" / "kubernetes@v1.37.2" / "build" / "pause" / "linux" / "pause.c"
    if not source.exists():
        raise NodeError(f"{source} missing: run humanwork_dev/scripts/build-node.sh first")
    work = CACHE / "images" / "pause"
    work.mkdir(parents=True, exist_ok=True)
    _run("gcc", "-Os", "-static", "-o", str(work / "pause"), str(source), '-DVERSION="3.10"')
    buildah = ["buildah", "--root", str(CACHE / "images" / "storage"),
               "--runroot", str(CACHE / "images" / "run")]  # fmt: skip
    ctr = _run(*buildah, "from", "scratch").stdout.strip()
    _run(*buildah, "copy", ctr, str(work / "pause"), "/pause")
    _run(*buildah, "config", "--entrypoint", '["/pause"]', "--user", "65535:65535", ctr)
    _run(*buildah, "commit", "--rm", ctr, "localhost/pause:3.10")
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(*buildah, "push", "localhost/pause:3.10", f"docker-archive:{out}:{PAUSE_IMAGE}")
    return out


def import_images(state: Path, archives: list[Path]) -> list[str]:
    """Import docker archives into the node's containerd (CRI namespace)."""
    d = node_dir(state)
    for archive in archives:
        _ctr(d, "images", "import", "--no-unpack=false", str(archive))
    listed = _ctr(d, "images", "ls", "-q").stdout.split()
    return [name for name in listed if not name.startswith("sha256:")]


def product_archives(build: bool) -> list[Path]:
    folder = CACHE / "images" / "archives"
    names = ("operator", "platform-api", "agent")
    if build or not all((folder / f"{n}.tar").exists() for n in names):
        done = subprocess.run([str(IMAGES_SCRIPT), "--archive", str(folder)], check=False)
        if done.returncode != 0:
            raise NodeError(f"{IMAGES_SCRIPT} failed (exit {done.returncode})")
    return [folder / f"{n}.tar" for n in names]


# --- storage: the local volumes the node offers ------------------------------------------

STORAGE_CLASS = "humanwork-node-local"
VOLUMES = {"platform-data": ("humanwork-system", "humanwork-platform-data", "1Gi", 10001)}
"""name: (namespace, claim, capacity, owner uid/gid): each a directory under the node's
state, offered as a local PersistentVolume bound to that claim only (the node overlay's
claim names it). The platform's SQLite file lives there: it outlives the platform's pod,
and the node's restarts (`down` leaves it; it goes with the cluster's state)."""


def volume_dir(state: Path, name: str) -> Path:
    return node_dir(state) / "volumes" / name


def volume_manifests(state: Path) -> list[dict[str, Any]]:
    """The StorageClass (no provisioner) and one local PersistentVolume per VOLUMES entry,
    reachable only on the real node (node affinity) and pre-bound to its claim."""
    affinity = {"required": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": LABEL[0], "operator": "In", "values": [LABEL[1]]}]}]}}  # fmt: skip
    docs: list[dict[str, Any]] = [{
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer", "reclaimPolicy": "Retain",
    }]  # fmt: skip
    for name, (namespace, claim, capacity, _) in VOLUMES.items():
        docs.append({
            "apiVersion": "v1", "kind": "PersistentVolume",
            "metadata": {"name": f"{NODE_NAME}-{name}"},
            "spec": {"capacity": {"storage": capacity}, "accessModes": ["ReadWriteOnce"],
                     "persistentVolumeReclaimPolicy": "Retain",
                     "storageClassName": STORAGE_CLASS,
                     "claimRef": {"namespace": namespace, "name": claim},
                     "local": {"path": str(volume_dir(state, name))},
                     "nodeAffinity": affinity},
        })  # fmt: skip
    return docs


def offer_volumes(state: Path) -> None:
    """Make the volumes' directories (owned by their pod's user, mode 0700) and apply their
    StorageClass and PersistentVolumes (server-side apply; idempotent)."""
    for name, (_, _, _, owner) in VOLUMES.items():
        path = volume_dir(state, name)
        path.mkdir(parents=True, exist_ok=True)
        os.chown(path, owner, owner)
        path.chmod(0o700)
    server = json.loads((state / "state.json").read_text())["server"]
    with cluster.admin_http(state) as c:
        for doc in volume_manifests(state):
            plural = "storageclasses" if doc["kind"] == "StorageClass" else "persistentvolumes"
            group = "apis/storage.k8s.io/v1" if plural == "storageclasses" else "api/v1"
            r = c.patch(f"{server}/{group}/{plural}/{doc['metadata']['name']}",
                        params={"fieldManager": "humanwork-node", "force": "true"},
                        headers={"Content-Type": "application/apply-patch+yaml"},
                        content=json.dumps(doc))  # fmt: skip
            if not r.is_success:
                what = f"{doc['kind']} {doc['metadata']['name']}"
                raise NodeError(f"{what}: {r.status_code} {r.text}")


# --- processes ------------------------------------------------------------------------------


def binaries() -> Path:
    for script in (PACKAGES_SCRIPT, BUILD_SCRIPT):
        done = subprocess.run([str(script)], check=False, stdout=subprocess.PIPE, text=True)
        if done.returncode != 0:
            raise NodeError(f"{script} failed (exit {done.returncode}); see its output above")
    return Path(done.stdout.strip().splitlines()[-1])


def _admin_get(state: Path, path: str) -> Any:
    server = json.loads((state / "state.json").read_text())["server"]
    with cluster.admin_http(state) as c:
        return c.get(f"{server}{path}").json()


def _node_ready(state: Path) -> bool:
    doc = _admin_get(state, f"/api/v1/nodes/{NODE_NAME}")
    conds = doc.get("status", {}).get("conditions", [])
    return any(x["type"] == "Ready" and x["status"] == "True" for x in conds)


def _wait(what: str, check: Callable[[], bool], timeout: float, pids: dict[str, Any]) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for name, p in pids.items():
            if p.poll() is not None:
                raise NodeError(f"{name} exited with {p.returncode} while waiting for {what}")
        with contextlib.suppress(Exception):
            if check():
                return
        time.sleep(0.3)
    raise NodeError(f"timed out after {timeout:.0f}s waiting for {what}")


async def _forward(listen: tuple[str, int], target: tuple[str, int]) -> None:
    """Copy TCP connections from `listen` to `target` (the API server on loopback), so that
    pods reach it at the address the `kubernetes` Service points at."""
    import asyncio

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(serve, *listen)
    async with server:
        await server.serve_forever()


def _router_synced() -> bool:
    return "-j KUBE-ROUTER-FORWARD" in _run("iptables", "-S", "FORWARD").stdout


def status(state: Path | None = None) -> dict[str, Any] | None:
    state = state or cluster.state_dir_default()
    path = node_dir(state) / "node.json"
    if not path.exists() or not cluster.status(state):
        return None
    info: dict[str, Any] = json.loads(path.read_text())
    if not all(cluster._alive(pid) for pid in info["pids"].values()):
        return None
    return info


def up(
    state: Path | None = None, timeout: float = 180.0, build_images: bool = False
) -> dict[str, Any]:
    """Start the real node beside a running control plane (or return the running one)."""
    state = state or cluster.state_dir_default()
    running = status(state)
    if running:
        return running
    if not cluster.status(state):
        raise NodeError("no local control plane is running: `humanwork-cluster up` first")
    with cluster._exclusive(state):
        _down(state)
        return _up(state, timeout, build_images)


def _commands(state: Path, bin_dir: Path) -> dict[str, list[str]]:
    """The argv of each process of the node, in start order (kept in node.json, so that
    `restart` starts a component again exactly as `up` did)."""
    d = node_dir(state)
    api_port = int(json.loads((state / "state.json").read_text())["server"].rsplit(":", 1)[1])
    return {
        "containerd": ["containerd", "--config", str(d / "containerd.toml")],
        "kubelet": [str(bin_dir / "kubelet"), f"--config={d / 'kubelet.yaml'}",
                    f"--kubeconfig={d / 'kubelet.kubeconfig'}",
                    f"--hostname-override={NODE_NAME}", f"--node-ip={NODE_IP}",
                    f"--root-dir={d / 'kubelet'}", f"--cert-dir={d / 'kubelet-pki'}",
                    f"--node-labels={LABEL[0]}={LABEL[1]}",
                    f"--register-with-taints={TAINT_KEY}=true:NoSchedule", "--v=1"],
        "api-forward": [sys.executable, "-m", "humanwork_dev.node", "forward",
                        f"{NODE_IP}:{api_port}", f"127.0.0.1:{api_port}"],
        "kube-proxy": [str(bin_dir / "kube-proxy"), f"--config={d / 'kube-proxy.yaml'}"],
        "coredns": [str(bin_dir / "coredns"), "-conf", str(d / "Corefile")],
        "kube-router": [str(bin_dir / "kube-router"), f"--kubeconfig={state / 'kubeconfig'}",
                        "--run-firewall=true", "--run-router=false",
                        "--run-service-proxy=false", "--enable-cni=false",
                        f"--hostname-override={NODE_NAME}",
                        f"--service-cluster-ip-range={cluster.SERVICE_CIDR}",
                        "--health-port=0", "--metrics-port=0", "--v=1"],
    }  # fmt: skip


def _up(state: Path, timeout: float, build_images: bool) -> dict[str, Any]:
    started = time.monotonic()
    phases: dict[str, float] = {}

    def mark(phase: str) -> None:
        phases[phase] = round(time.monotonic() - started, 2)

    bin_dir = binaries()
    archives = [pause_archive(), *product_archives(build_images)]
    mark("binaries+images")
    names = ("kubelet", "kubelet-healthz", "proxy-healthz", "proxy-metrics")
    ports = {n: cluster.free_port() for n in names}
    d = write_configs(state, ports)
    guard_up(d / "ip_forward.saved")  # before any pod can run
    # let `ip netns` make /run/netns its shared mount now: made later (by a test's own
    # `ip netns add`), its bind mount would hide the pods' namespaces from `down`
    _run("ip", "netns", "add", "hwnode-init")
    _run("ip", "netns", "delete", "hwnode-init")
    if not (d / "netns.before").exists():
        (d / "netns.before").write_text("\n".join(sorted(_cni_netns())))
    argv = _commands(state, bin_dir)
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(*names: str) -> None:
        for name in names:
            procs[name] = cluster.spawn(name, argv[name], d / "logs")

    try:
        start("containerd")
        _wait("containerd", lambda: _ctr(d, "version").returncode == 0, 60, procs)
        images = import_images(state, archives)
        mark("containerd+import")
        start("kubelet")
        _wait("the real node to be Ready", lambda: _node_ready(state), timeout, procs)
        offer_volumes(state)
        mark("kubelet")
        start("api-forward", "kube-proxy", "coredns", "kube-router")
        healthz = f"http://127.0.0.1:{ports['proxy-healthz']}/healthz"
        _wait("kube-proxy /healthz", lambda: httpx.get(healthz).is_success, 60, procs)
        _wait("kube-router's first sync", _router_synced, 60, procs)
        mark("proxy+dns+netpol")
        if not guard_holds():
            raise NodeError(f"the egress guard (nft table {' '.join(GUARD_TABLE)}) is not in "
                            "place as made, or another base chain runs before it")  # fmt: skip
    except BaseException:
        _stop(state, {n: p.pid for n, p in procs.items()})
        raise
    info = {
        "node": NODE_NAME,
        "node_ip": NODE_IP,
        "pod_cidr": POD_CIDR,
        "pids": {n: p.pid for n, p in procs.items()},
        "argv": argv,
        "images": images,
        "ready_seconds": round(time.monotonic() - started, 2),
        "phases": phases,
    }
    (d / "node.json").write_text(json.dumps(info, indent=2))
    return info


def restart(state: Path, name: str) -> int:
    """Stop one component of the running node and start it again with the same argv (what
    a crash and its supervisor, or an upgrade, do); the new pid. kube-proxy and kube-router
    resync their rules in full when they start."""
    d = node_dir(state)
    info = status(state)
    if info is None or name not in info.get("argv", {}):
        raise NodeError(f"no running node with a component {name!r}")
    cluster.stop_process(info["pids"][name])
    info["pids"][name] = cluster.spawn(name, info["argv"][name], d / "logs").pid
    (d / "node.json").write_text(json.dumps(info, indent=2))
    return int(info["pids"][name])


def _shim_pids(d: Path) -> list[int]:
    """The containerd shims serving this node's containerd (they outlive it otherwise)."""
    sock = str(d / "containerd.sock")
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            if argv and argv[0].endswith(b"containerd-shim-runc-v2") and sock.encode() in argv:
                pids.append(int(proc.name))
    return pids


def _cni_netns() -> set[str]:
    folder = Path("/run/netns")
    return {p.name for p in folder.glob("cni-*")} if folder.exists() else set()


def _mounts_under(root: Path) -> list[str]:
    prefix = str(root) + "/"
    lines = Path("/proc/self/mounts").read_text().splitlines()
    points = [ln.split()[1].replace("\\040", " ") for ln in lines]
    return sorted({p for p in points if p.startswith(prefix)}, key=len, reverse=True)


def _stop(state: Path, pids: dict[str, int]) -> None:
    d = node_dir(state)
    kubelet = pids.pop("kubelet", None)
    if kubelet:
        cluster.stop_process(kubelet)
    if "containerd" in pids and (d / "containerd.sock").exists():
        # every pod's sandbox: stopped and removed through CRI's own store (CNI DEL included)
        tasks = _ctr(d, "tasks", "ls", "-q", check=False).stdout.split()
        for task in tasks:
            _ctr(d, "tasks", "kill", "-s", "SIGKILL", task, check=False)
        time.sleep(1)
        for task in tasks:
            _ctr(d, "tasks", "delete", "-f", task, check=False)
    for name in ("kube-router", "coredns", "kube-proxy", "api-forward", "containerd"):
        if name in pids:
            cluster.stop_process(pids[name])
    for pid in _shim_pids(d):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, 9)
    for point in _mounts_under(d):
        _run("umount", "-l", point, check=False, quiet=True)
    if not _mounts_under(d):  # the images and pods' files (a new `up` imports again)
        for sub in ("containerd", "kubelet"):
            shutil.rmtree(d / sub, ignore_errors=True)
    # the pods' network namespaces that CNI made while this node ran
    before_file = d / "netns.before"
    before = set(before_file.read_text().split()) if before_file.exists() else set()
    for netns in _cni_netns() - before:
        _run("ip", "netns", "delete", netns, check=False, quiet=True)
    # kube-proxy's and kube-router's chains and sets (only this node runs them here)
    _cleanup_service_rules()
    guard_down(d / "ip_forward.saved")


def _cleanup_service_rules() -> None:
    for table in ("filter", "nat", "mangle"):
        rules = _run("iptables-save", "-t", table, check=False, quiet=True).stdout.splitlines()
        ours = ("KUBE-", "KUBE_")
        for line in rules:
            words = shlex.split(line)  # comments are quoted and hold spaces
            if line.startswith("-A ") and not words[1].startswith(ours) and "-j KUBE-" in line:
                _run("iptables", "-t", table, "-D", *words[1:], check=False, quiet=True)
        chains = [ln[1:].split()[0] for ln in rules if ln.startswith(":KUBE-")]
        for chain in chains:
            _run("iptables", "-t", table, "-F", chain, check=False, quiet=True)
        for chain in chains:
            _run("iptables", "-t", table, "-X", chain, check=False, quiet=True)
    for name in _run("ipset", "list", "-n", check=False, quiet=True).stdout.split():
        if name.startswith(("KUBE-", "kube-router-", "inet6:")):
            _run("ipset", "destroy", name, check=False, quiet=True)


def down(state: Path | None = None) -> None:
    """Stop the real node and remove everything it added to the machine."""
    state = state or cluster.state_dir_default()
    with cluster._exclusive(state):
        _down(state)


def _down(state: Path) -> None:
    d = node_dir(state)
    path = d / "node.json"
    pids: dict[str, int] = {}
    if path.exists():
        with contextlib.suppress(ValueError, TypeError):
            pids = dict(json.loads(path.read_text()).get("pids", {}))
        path.unlink()
    _stop(state, pids)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="humanwork-node", description=__doc__.split("\n")[0])
    parser.add_argument("command", choices=["up", "down", "status", "forward", "restart"])
    parser.add_argument(
        "args",
        nargs="*",
        help="forward: LISTEN-HOST:PORT TARGET-HOST:PORT; "
        "restart: a component (kube-proxy, kube-router, ...)",
    )
    parser.add_argument("--state-dir", type=Path, default=None)
    parser.add_argument("--build-images", action="store_true", help="rebuild the images first")
    args = parser.parse_args(argv)
    state = args.state_dir or cluster.state_dir_default()
    if args.command == "forward":
        import asyncio

        (lh, lp), (th, tp) = (a.rsplit(":", 1) for a in args.args)
        asyncio.run(_forward((lh, int(lp)), (th, int(tp))))
        return 0
    try:
        if args.command == "up":
            info = up(state, build_images=args.build_images)
            print(f"real node {NODE_NAME} ready ({info['ready_seconds']}s): {info['phases']}",
                  file=sys.stderr)  # fmt: skip
        elif args.command == "restart":
            print(f"{args.args[0]} restarted (pid {restart(state, args.args[0])})", file=sys.stderr)
        elif args.command == "down":
            down(state)
            print("real node stopped", file=sys.stderr)
        else:
            running = status(state)
            if not running:
                print("no real node is running", file=sys.stderr)
                return 1
            print(json.dumps(running, indent=2))
    except NodeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
