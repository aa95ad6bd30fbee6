"""The real node's configuration files: containerd (runc behind the OOM wrapper), the CNI
bridge, the kubelet, kube-proxy, CoreDNS, and the kubeconfigs of the kubelet and
kube-proxy; `write_configs` writes them all under `<cluster state>/node/`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from humanwork_dev import cluster, pki
from humanwork_dev.nodenet import (
    BRIDGE,
    CNI_BIN,
    NODE_IP,
    NODE_NAME,
    PAUSE_IMAGE,
    POD_CIDR,
    node_dir,
)

OOM_WRAPPER = """#!/bin/sh
# runc behind containerd: root here lacks CAP_SYS_RESOURCE, so a negative oom_score_adj
# (the kubelet gives pod sandboxes -998) cannot be set; rewrite it to 0 in the bundle.
bundle=""; prev=""
for a in "$@"; do
  case "$a" in --bundle=*) bundle="${a#--bundle=}";; esac
  case "$prev" in --bundle|-b) bundle="$a";; esac
  prev="$a"
done
if [ -n "$bundle" ] && [ -f "$bundle/config.json" ]; then
  sed -i -E 's/"oomScoreAdj":-[0-9]+/"oomScoreAdj":0/' "$bundle/config.json"
fi
exec /usr/bin/runc "$@"
"""


def _containerd_config(d: Path) -> str:
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    return f"""version = 2
root = "{d / "containerd" / "root"}"
state = "{d / "containerd" / "state"}"
[grpc]
  address = "{d / "containerd.sock"}"
[ttrpc]
  address = "{d / "containerd.sock.ttrpc"}"
[debug]
  address = "{d / "containerd-debug.sock"}"
[metrics]
  address = ""
[{cri}]
  sandbox_image = "{PAUSE_IMAGE}"
  enable_selinux = false
  restrict_oom_score_adj = true
  [{cri}.containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [{cri}.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [{cri}.containerd.runtimes.runc.options]
        BinaryName = "{d / "oom-wrapper.sh"}"
        SystemdCgroup = false
  [{cri}.cni]
    bin_dir = "{CNI_BIN}"
    conf_dir = "{d / "cni"}"
"""


def _cni_config() -> dict[str, Any]:
    return {
        "cniVersion": "0.4.0",
        "name": "humanwork-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,  # nothing is masqueraded: no packet is meant to leave
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [[{"subnet": POD_CIDR, "gateway": NODE_IP,
                                 "rangeStart": "10.213.0.10", "rangeEnd": "10.213.0.250"}]],
                    "routes": [{"dst": "0.0.0.0/0"}],
                },
            },
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }  # fmt: skip


def _kubelet_config(d: Path, state: Path, ports: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "failCgroupV1": False,  # this machine's cgroups are hybrid v1 (see the node note)
        "cgroupDriver": "cgroupfs",
        "containerRuntimeEndpoint": f"unix://{d / 'containerd.sock'}",
        "address": NODE_IP,
        "port": ports["kubelet"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports["kubelet-healthz"],
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(state / "pki" / "ca.crt")},
        },
        "authorization": {"mode": "AlwaysAllow"},  # any client certificate of the local CA
        "clusterDNS": [NODE_IP],
        "clusterDomain": "cluster.local",
        "resolvConf": str(d / "resolv.conf"),
        "failSwapOn": False,
        "serializeImagePulls": False,
        "maxPods": 110,
        "evictionHard": {"memory.available": "100Mi"},
        "imageGCHighThresholdPercent": 100,
        "syncFrequency": "10s",  # Secret/ConfigMap volume updates reach pods sooner
        "podCIDR": POD_CIDR,
    }


def _kube_proxy_config(d: Path, ports: dict[str, int]) -> dict[str, Any]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": str(d / "kube-proxy.kubeconfig")},
        "mode": "iptables",
        "clusterCIDR": POD_CIDR,
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP,
        "healthzBindAddress": f"127.0.0.1:{ports['proxy-healthz']}",
        "metricsBindAddress": f"127.0.0.1:{ports['proxy-metrics']}",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "conntrack": {"maxPerCore": 0},  # leave the machine's conntrack sysctls alone
        "iptables": {"localhostNodePorts": False, "masqueradeAll": False},
    }


def _corefile(state: Path) -> str:
    # no `forward`: a name outside the cluster gets no answer and no packet leaves
    return f""".:53 {{
    bind {NODE_IP}
    errors
    health 127.0.0.1:{cluster.free_port()}
    kubernetes cluster.local in-addr.arpa ip6.arpa {{
        kubeconfig {state / "kubeconfig"} humanwork-local
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 5
}}
"""


def write_configs(state: Path, ports: dict[str, int]) -> Path:
    d = node_dir(state)
    for sub in ("logs", "cni", "containerd", "kubelet", "kubelet-pki"):
        (d / sub).mkdir(parents=True, exist_ok=True)
    (d / "oom-wrapper.sh").write_text(OOM_WRAPPER)
    (d / "oom-wrapper.sh").chmod(0o755)
    (d / "containerd.toml").write_text(_containerd_config(d))
    (d / "cni" / "10-humanwork.conflist").write_text(json.dumps(_cni_config(), indent=2))
    (d / "kubelet.yaml").write_text(yaml.safe_dump(_kubelet_config(d, state, ports)))
    (d / "kube-proxy.yaml").write_text(yaml.safe_dump(_kube_proxy_config(d, ports)))
    (d / "Corefile").write_text(_corefile(state))
    (d / "resolv.conf").write_text("")  # pods get cluster DNS only, not the host's
    pki_dir = state / "pki"
    ca = pki_dir / "ca.crt"
    server = json.loads((state / "state.json").read_text())["server"]
    for user, stem in (("kubelet", "node"), ("kube-proxy", "kube-proxy")):
        pair = pki.Pair(pki_dir / f"{stem}.crt", pki_dir / f"{stem}.key")
        cluster._kubeconfig(d / f"{user}.kubeconfig", server, ca, pair, user)
    return d
