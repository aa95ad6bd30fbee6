#!/usr/bin/env bash
# Install the named Debian packages that are not installed yet (`apt-get update` once,
# then `apt-get install --no-install-recommends`). Idempotent: does nothing when every
# package is installed. Needs root (or sudo) when something is missing. The one apt path
# of install-postgres.sh, install-chromium.sh and node-packages.sh.
#   usage: apt-install.sh PACKAGE...
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "apt-install.sh: ${missing[*]} missing; installing needs root" >&2; exit 1; }
  as_root=(sudo)
fi
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -q --no-install-recommends "${missing[@]}"
