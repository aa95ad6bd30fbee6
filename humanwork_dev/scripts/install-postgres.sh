#!/usr/bin/env bash
# Install PostgreSQL's server binaries from Debian's packages when they are missing, for
# the throwaway servers of humanwork_dev/postgres.py. Idempotent: does nothing when
# an initdb exists under /usr/lib/postgresql/*/bin. Needs root (or sudo) to install.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "install.sh: PostgreSQL is missing and installing it needs root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends postgresql

if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  echo "install.sh: postgresql installed but no initdb under /usr/lib/postgresql/*/bin" >&2
  exit 1
fi
