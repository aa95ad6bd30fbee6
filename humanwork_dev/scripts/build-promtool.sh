#!/usr/bin/env bash
# Build promtool from the Go module proxy and cache it per machine (see go-tool.sh).
#
# promtool comes from the Go module github.com/prometheus/prometheus at PROMTOOL_VERSION
# (pinned; the module's v0.X.Y tags are Prometheus 3.X.Y). The tag remove_all_sd leaves out
# Prometheus's service discovery plugins (the cloud SDKs: promtool's rule checks and tests
# need none). The binary lands in $HUMANWORK_CACHE/promtool-<version>/bin; a second run finds
# it there and returns at once. Prints the bin directory. The tests of manifests/monitoring
# (`promtool check rules`, `promtool test rules`) use it.
set -euo pipefail
. "$(dirname "$0")/go-tool.sh"

PROMTOOL_VERSION="${PROMTOOL_VERSION:-v0.316.0}"
go_tool_begin promtool "promtool-${PROMTOOL_VERSION}" "$@"
go_tool_install "github.com/prometheus/prometheus/cmd/promtool@${PROMTOOL_VERSION}" \
  -tags "netgo,remove_all_sd" \
  -ldflags "-s -w -X github.com/prometheus/common/version.Version=${PROMTOOL_VERSION#v}"
go_tool_done
