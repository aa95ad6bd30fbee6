#!/usr/bin/env bash
# Build the real node's binaries from Go modules and cache them per machine (a sibling of
# build.sh, which builds the control plane's):
#   kubelet, kube-proxy   k8s.io/kubernetes at K8S_VERSION (the control plane's module)
#   kube-router           github.com/cloudnativelabs/kube-router/v2 (run firewall-only, the
#                         NetworkPolicy enforcer), built with newer golang.org/x modules than
#                         its release pins (the security reports against it are in those)
#   coredns               github.com/coredns/coredns (cluster DNS)
# Binaries land in $HUMANWORK_CACHE/node-<versions>/bin; a second run returns at once.
# `--print-bin` prints that directory.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
KUBE_ROUTER_VERSION="${KUBE_ROUTER_VERSION:-v2.1.0}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.14.7}"
CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}"
KEY="node-k8s-${K8S_VERSION}_kube-router-${KUBE_ROUTER_VERSION}_coredns-${COREDNS_VERSION}"
BIN="$CACHE/$KEY/bin"
BINARIES=(kubelet kube-proxy kube-router coredns)

if [ "${1:-}" = "--print-bin" ]; then echo "$BIN"; exit 0; fi
missing=()
for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required to build the node's binaries" >&2; exit 1; }
mkdir -p "$BIN"
WORK="$CACHE/$KEY/src"
mkdir -p "$WORK/k8s" "$WORK/kube-router" "$WORK/coredns"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
HERE="$(cd "$(dirname "$0")" && pwd)"
log() { echo "build-node: $*" >&2; }
timed() { local t=$SECONDS; "$@"; log "$(basename "${@: -1}") built in $((SECONDS - t))s"; }

# --- kubelet and kube-proxy: the go.mod build.sh writes (staging -> v0.X.Y), with the
# kubelet's extra staging requirements resolved by go get
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
cp_src="$("$HERE/build.sh" --print-bin)/../src/k8s/go.mod"
if [ ! -f "$WORK/k8s/go.mod" ]; then
  if [ -f "$cp_src" ]; then cp "$cp_src" "$WORK/k8s/go.mod"; cp "${cp_src%.mod}.sum" "$WORK/k8s/" 2>/dev/null || true
  else echo "build-node: run humanwork_dev/scripts/build.sh first (its go.mod is reused)" >&2; exit 1; fi
fi
cmds=()
for b in kubelet kube-proxy; do [ -x "$BIN/$b" ] || cmds+=("k8s.io/kubernetes/cmd/$b"); done
if [ ${#cmds[@]} -gt 0 ]; then
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  build_k8s() { (cd "$WORK/k8s" && go get "${cmds[@]}" && go build -trimpath -ldflags "$ldflags" -o "$BIN/" "${cmds[@]}"); }
  timed build_k8s kubelet+kube-proxy
fi

# --- kube-router (firewall only at run time)
if [ ! -x "$BIN/kube-router" ]; then
  build_kr() {
    cd "$WORK/kube-router"
    printf 'module humanwork.local/node/kube-router\n\ngo 1.25\n' > go.mod
    go get "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@${KUBE_ROUTER_VERSION}"
    go get golang.org/x/net@latest golang.org/x/sys@latest golang.org/x/text@latest golang.org/x/crypto@latest
    go build -trimpath -ldflags "-s -w" -o "$BIN/kube-router" github.com/cloudnativelabs/kube-router/v2/cmd/kube-router
  }
  (timed build_kr kube-router)
fi

# --- CoreDNS
if [ ! -x "$BIN/coredns" ]; then
  build_dns() {
    cd "$WORK/coredns"
    printf 'module humanwork.local/node/coredns\n\ngo 1.25\n' > go.mod
    go get "github.com/coredns/coredns@${COREDNS_VERSION}"
    go build -trimpath -ldflags "-s -w" -o "$BIN/coredns" github.com/coredns/coredns
  }
  (timed build_dns coredns)
fi
echo "$BIN"
