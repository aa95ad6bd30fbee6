#!/usr/bin/env bash
# Build promtool from the Go module proxy and cache it per machine.
#
# promtool comes from the Go module github.com/prometheus/prometheus at PROMTOOL_VERSION
# (pinned; the module's v0.X.Y tags are Prometheus 3.X.Y), built with the same toolchain and
# flags as the control plane's binaries (humanwork_dev/scripts/build.sh), niced: a cold build
# takes many minutes on 2 cores. The tag remove_all_sd leaves out Prometheus's service
# discovery plugins (the cloud SDKs: promtool's rule checks and tests need none). The binary lands in $HUMANWORK_CACHE/promtool-<version>/bin
# (outside the repository); a second run finds it there and returns at once. Prints the bin
# directory. The tests of manifests/monitoring (`promtool check rules`, `promtool test rules`)
# use it.
set -euo pipefail

PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}"
KEY="promtool-${PROMTOOL_VERSION}"
BIN="$CACHE/$KEY/bin"

if [ "${1:-}" = "--print-bin" ]; then echo "$BIN"; exit 0; fi
if [ -x "$BIN/promtool" ]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required to build promtool" >&2; exit 1; }
mkdir -p "$BIN"
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
start=$(date +%s)
echo "building promtool ${PROMTOOL_VERSION} (a cold build takes many minutes on 2 cores)" >&2
ldflags="-s -w -X github.com/prometheus/common/version.Version=${PROMTOOL_VERSION#v}"
# build into a temporary directory, then rename: a build cut midway never leaves a broken binary
tmp="$CACHE/$KEY/tmp.$$"
rm -rf "$tmp"
GOBIN="$tmp" nice -n 10 go install -trimpath -tags "netgo,remove_all_sd" -ldflags "$ldflags" \
  "github.com/prometheus/prometheus/cmd/promtool@${PROMTOOL_VERSION}"
mv "$tmp/promtool" "$BIN/promtool"
rmdir "$tmp"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
