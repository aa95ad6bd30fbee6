#!/usr/bin/env bash
# Build a small OpenTelemetry Collector from the Go module proxy and cache it per machine.
#
# The collector is otelcol/main.go beside this script: the OTLP receiver and the file
# exporter at pinned versions (core OTELCOL_VERSION / OTELCOL_STABLE_VERSION, contrib
# OTELCOL_CONTRIB_VERSION, all of one release), built with the same flags as the control
# plane's binaries. The binary lands in $HUMANWORK_CACHE/otelcol-<version>/bin (outside the
# repository); a second run finds it there and returns at once. Prints the bin directory.
set -euo pipefail

OTELCOL_VERSION="${OTELCOL_VERSION:-v0.161.0}"
OTELCOL_STABLE_VERSION="${OTELCOL_STABLE_VERSION:-v1.67.0}"
OTELCOL_CONTRIB_VERSION="${OTELCOL_CONTRIB_VERSION:-v0.161.0}"
CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}"
HERE="$(cd "$(dirname "$0")" && pwd)"
# a change of main.go is a new binary
SOURCE_HASH="$(sha256sum "$HERE/otelcol/main.go" | cut -c1-12)"
KEY="otelcol-${OTELCOL_VERSION}_contrib-${OTELCOL_CONTRIB_VERSION}_${SOURCE_HASH}"
BIN="$CACHE/$KEY/bin"

if [ "${1:-}" = "--print-bin" ]; then echo "$BIN"; exit 0; fi
if [ -x "$BIN/otelcol" ]; then echo "$BIN"; exit 0; fi

command -v go >/dev/null || { echo "error: Go is required to build the collector" >&2; exit 1; }
export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
start=$(date +%s)
echo "building otelcol ${OTELCOL_VERSION} (a cold build takes many minutes on 2 cores)" >&2
SRC="$CACHE/$KEY/src"
rm -rf "$SRC" && mkdir -p "$SRC" "$BIN"
cp "$HERE/otelcol/main.go" "$SRC/main.go"
core=go.opentelemetry.io/collector
contrib=github.com/open-telemetry/opentelemetry-collector-contrib
cat >"$SRC/go.mod" <<MOD
module humanwork.io/otelcol

go 1.26.0

require (
	${contrib}/exporter/fileexporter ${OTELCOL_CONTRIB_VERSION}
	${core}/component ${OTELCOL_STABLE_VERSION}
	${core}/confmap ${OTELCOL_STABLE_VERSION}
	${core}/confmap/provider/fileprovider ${OTELCOL_STABLE_VERSION}
	${core}/exporter ${OTELCOL_STABLE_VERSION}
	${core}/otelcol ${OTELCOL_VERSION}
	${core}/receiver ${OTELCOL_STABLE_VERSION}
	${core}/receiver/otlpreceiver ${OTELCOL_VERSION}
	${core}/service ${OTELCOL_VERSION}
)
MOD
(cd "$SRC" && go mod tidy >&2 && nice -n 10 go build -trimpath -ldflags "-s -w" -o "$BIN/otelcol.tmp" .)
# build into a temporary name, then rename: a build cut midway never leaves a broken binary
mv "$BIN/otelcol.tmp" "$BIN/otelcol"
echo "built in $(( $(date +%s) - start ))s" >&2
echo "$BIN"
