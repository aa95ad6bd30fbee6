#!/usr/bin/env bash
# Build the local control plane's binaries from Go modules and cache them per machine.
#
# kube-apiserver, kube-controller-manager, kube-scheduler and kubectl come from the
# Go module k8s.io/kubernetes at K8S_VERSION (its staging modules are mapped to the
# matching v0.X.Y tags by the go.mod this script writes); etcd from
# go.etcd.io/etcd/server/v3; kwok from sigs.k8s.io/kwok. Binaries land in
# $HUMANWORK_CACHE/cluster-<versions>/bin (outside the repository) and a second
# run finds them there and returns at once.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
KWOK_VERSION="${KWOK_VERSION:-v0.8.0}"
CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}"
KEY="k8s-${K8S_VERSION}_etcd-${ETCD_VERSION}_kwok-${KWOK_VERSION}"
BIN="$CACHE/$KEY/bin"
BINARIES=(kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok)

if [ "${1:-}" = "--print-bin" ]; then echo "$BIN"; exit 0; fi

missing=()
for b in "${BINARIES[@]}"; do [ -x "$BIN/$b" ] || missing+=("$b"); done
if [ ${#missing[@]} -eq 0 ]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required to build the control plane binaries" >&2; exit 1; }
mkdir -p "$BIN"
WORK="$CACHE/$KEY/src"
mkdir -p "$WORK/k8s" "$WORK/etcd"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
start=$(date +%s)

# --- Kubernetes: a module of our own requiring k8s.io/kubernetes, staging -> v0.X.Y
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
patch="${K8S_VERSION##*.}"
staging_tag="v0.${minor}.${patch}"
modfile=$(cd /tmp && go mod download -json "k8s.io/kubernetes@${K8S_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
{
  echo "module humanwork.local/cluster/k8s"
  echo
  echo "go $(sed -n 's/^go \(.*\)/\1/p' "$modfile")"
  echo
  echo "require k8s.io/kubernetes ${K8S_VERSION}"
  echo
  echo "replace ("
  sed -n 's#^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/src/.*#\1#p' "$modfile" | while read -r m; do
    echo "	$m => $m ${staging_tag}"
  done
  echo ")"
} > "$WORK/k8s/go.mod"
k8s_cmds=()
for b in kube-apiserver kube-controller-manager kube-scheduler kubectl; do
  [ -x "$BIN/$b" ] || k8s_cmds+=("k8s.io/kubernetes/cmd/$b")
done
if [ ${#k8s_cmds[@]} -gt 0 ]; then
  echo "building ${k8s_cmds[*]} at ${K8S_VERSION} (a cold build takes a while on 2 cores)" >&2
  ldflags="-s -w -X k8s.io/component-base/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=${minor}"
  ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=${K8S_VERSION}"
  ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=${minor}"
  (cd "$WORK/k8s" && go get "${k8s_cmds[@]}" && go build -trimpath -ldflags "$ldflags" -o "$BIN/" "${k8s_cmds[@]}")
fi

# --- etcd
if [ ! -x "$BIN/etcd" ]; then
  echo "building etcd ${ETCD_VERSION}" >&2
  printf 'module humanwork.local/cluster/etcd\n\ngo 1.25\n' > "$WORK/etcd/go.mod"
  (cd "$WORK/etcd" && go get "go.etcd.io/etcd/server/v3@${ETCD_VERSION}" && go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3)
fi

# --- kwok
if [ ! -x "$BIN/kwok" ]; then
  echo "building kwok ${KWOK_VERSION}" >&2
  GOBIN="$BIN" go install -trimpath -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@${KWOK_VERSION}"
fi

echo "built in $(( $(date +%s) - start ))s" >&2
echo "$((  $(date +%s) - start ))" > "$CACHE/$KEY/build-seconds"
echo "$BIN"
