#!/usr/bin/env bash
# Install, from Debian's packages, what the image build and the real node need when it is
# missing: buildah (daemonless image builder), debootstrap (the Debian base image), umoci
# (the pause image's OCI layout), containerd + runc (the CRI runtime), the CNI plugins
# (bridge + host-local), ipset/conntrack/iptables (kube-proxy and kube-router), nftables
# (`nft`: the egress guard's own table, humanwork_dev.node), gcc (the
# static pause binary). Idempotent; needs root (or sudo). Debian starts no service here
# (no systemd); containerd is started by humanwork_dev.node.
set -euo pipefail

need=(buildah debootstrap umoci containerd runc containernetworking-plugins ipset
      conntrack iptables nftables gcc libc6-dev)
exec bash "$(dirname "$0")/apt-install.sh" "${need[@]}"
