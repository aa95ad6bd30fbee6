#!/usr/bin/env bash
# Build a small OpenTelemetry Collector from the Go module proxy and cache it per machine
# (see go-tool.sh).
#
# The collector is otelcol/main.go beside this script: the OTLP receiver and the file
# exporter at pinned versions (core OTELCOL_VERSION / OTELCOL_STABLE_VERSION, contrib
# OTELCOL_CONTRIB_VERSION, all of one release). The binary lands in
# $HUMANWORK_CACHE/otelcol-<version>/bin; a second run finds it there and returns at once.
# Prints the bin directory.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"

OTELCOL_VERSION="${OTELCOL_VERSION:-v0.161.0}"
OTELCOL_STABLE_VERSION="${OTELCOL_STABLE_VERSION:-v1.67.0}"
OTELCOL_CONTRIB_VERSION="${OTELCOL_CONTRIB_VERSION:-v0.161.0}"
HERE="$(cd "$(dirname "$0")" && pwd)"
# a change of main.go is a new binary
SOURCE_HASH="$(sha256sum "$HERE/otelcol/main.go" | cut -c1-12)"
KEY="otelcol-${OTELCOL_VERSION}_contrib-${OTELCOL_CONTRIB_VERSION}_${SOURCE_HASH}"
go_tool_begin otelcol "$KEY" "$@"
SRC="$CACHE/$KEY/src"
rm -rf "$SRC" && mkdir -p "$SRC"
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
mv "$BIN/otelcol.tmp" "$BIN/otelcol"
go_tool_done
