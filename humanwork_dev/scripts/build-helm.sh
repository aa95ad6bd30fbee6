#!/usr/bin/env bash
# Build helm from the Go module proxy and cache it per machine (see go-tool.sh).
#
# helm comes from the Go module helm.sh/helm/v3 at HELM_VERSION (pinned). The binary lands
# in $HUMANWORK_CACHE/helm-<version>/bin; a second run finds it there and returns at once.
# Prints the bin directory.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"

HELM_VERSION="${HELM_VERSION:-v3.22.0}"
go_tool_begin helm "helm-${HELM_VERSION}" "$@"
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
go_tool_install "helm.sh/helm/v3/cmd/helm@${HELM_VERSION}" -ldflags "$ldflags"
go_tool_done
