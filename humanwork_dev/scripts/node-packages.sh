#!/usr/bin/env bash
# Install, from Debian's packages, what the image build and the real node need when it is
# missing: buildah (daemonless image builder), debootstrap (the Debian base image), umoci
# (the pause image's OCI layout), containerd + runc (the CRI runtime), the CNI plugins
# (bridge + host-local), ipset/conntrack/iptables (kube-proxy and kube-router), nftables
# (`nft`: the egress guard's own table, humanwork_dev.node), gcc (the
# static pause binary). Idempotent; needs root (or sudo).
set -euo pipefail

need=(buildah debootstrap umoci containerd runc containernetworking-plugins ipset
      conntrack iptables nftables gcc libc6-dev)
missing=()
for p in "${need[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "install.sh: ${missing[*]} missing; installing needs root" >&2; exit 1; }
  as_root=(sudo)
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
# Debian starts no service here (no systemd); containerd is started by humanwork_dev.node.
