# Sourced by build-helm.sh, build-promtool.sh and build-otelcol.sh: the one shape of a Go
# tool built from the module proxy and cached per machine in $HUMANWORK_CACHE/<key>/bin
# (outside the repository), with the control plane's flags (humanwork_dev/scripts/build.sh),
# niced (a cold build takes many minutes on 2 cores), into a temporary name first so that a
# build cut midway never leaves a broken binary.
#
#   go_tool_begin TOOL KEY "$@"   # prints the bin directory and exits when cached (or asked
#                                 # with --print-bin); else sets CACHE and BIN, checks Go
#   go_tool_install PKG@VERSION [go install flags...]
#   go_tool_done                  # says how long it took, prints the bin directory

go_tool_begin() {
  TOOL="$1" KEY="$2"
  shift 2
  CACHE="${HUMANWORK_CACHE:-$HOME/.cache/humanwork}"
  BIN="$CACHE/$KEY/bin"
  if [ "${1:-}" = "--print-bin" ]; then echo "$BIN"; exit 0; fi
  if [ -x "$BIN/$TOOL" ]; then echo "$BIN"; exit 0; fi
  command -v go >/dev/null || { echo "error: Go is required to build $TOOL" >&2; exit 1; }
  mkdir -p "$BIN"
  export CGO_ENABLED=0 GOFLAGS="-mod=mod -buildvcs=false"
  GO_TOOL_START=$(date +%s)
  echo "building $TOOL ($KEY; a cold build takes many minutes on 2 cores)" >&2
}

go_tool_install() {
  local pkg="$1" tmp="$CACHE/$KEY/tmp.$$"
  shift
  rm -rf "$tmp"
  GOBIN="$tmp" nice -n 10 go install -trimpath "$@" "$pkg"
  mv "$tmp/$TOOL" "$BIN/$TOOL"
  rmdir "$tmp"
}

go_tool_done() {
  echo "built in $(( $(date +%s) - GO_TOOL_START ))s" >&2
  echo "$BIN"
}
