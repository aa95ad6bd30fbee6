#!/usr/bin/env bash
# Build helm from the Go module proxy and cache it per machine.
#
# helm comes from the Go module helm.sh/helm/v3 at HELM_VERSION (pinned), built with the
# same toolchain and flags as the control plane's binaries (humanwork_dev/scripts/build.sh).
# The binary lands in $HUMANWORK_CACHE/helm-<version>/bin (outside the repository); a
# second run finds it there and returns at once. Prints the bin directory.
set -euo pipefail

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}"
KEY="helm-${HELM_VERSION}"
BIN="$CACHE/$KEY/bin"

if [ "${1:-}" = "--print-bin" ]; then echo "$BIN"; exit 0; fi
if [ -x "$BIN/helm" ]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required to build helm" >&2; exit 1; }
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
start=$(date +%s)
echo "building helm ${HELM_VERSION} (a cold build takes a few minutes on 2 cores)" >&2
# as helm's own Makefile: the Kubernetes version it renders and lints for by default is the
# one of its client-go (v0.X.Y -> 1.X), not the built-in fallback 1.20
modfile=$(cd /tmp && go mod download -json "helm.sh/helm/v3@${HELM_VERSION}" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
k8s_minor=$(sed -n 's#^\s*k8s.io/client-go v0\.\([0-9]*\)\..*#\1#p' "$modfile")
[ -n "$k8s_minor" ] || { echo "error: no k8s.io/client-go in helm's go.mod" >&2; exit 1; }
ldflags="-s -w -X helm.sh/helm/v3/internal/version.version=${HELM_VERSION}"
ldflags+=" -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  ldflags+=" -X helm.sh/helm/v3/${pkg}.k8sVersionMajor=1 -X helm.sh/helm/v3/${pkg}.k8sVersionMinor=${k8s_minor}"
done
# build into a temporary name, then rename: a build cut midway never leaves a broken binary
GOBIN="$CACHE/$KEY/tmp" go install -trimpath -ldflags "$ldflags" "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}"
mv "$CACHE/$KEY/tmp/helm" "$BIN/helm"
rmdir "$CACHE/$KEY/tmp"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
