#!/usr/bin/env bash
# Install PostgreSQL's server binaries from Debian's packages when they are missing, for
# the throwaway servers of humanwork_dev/postgres.py. Idempotent: does nothing when
# an initdb exists under /usr/lib/postgresql/*/bin. Needs root (or sudo) to install.
set -euo pipefail

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  exit 0
fi
bash "$(dirname "$0")/apt-install.sh" postgresql
if ! compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then
  echo "install-postgres.sh: postgresql installed but no initdb under /usr/lib/postgresql/*/bin" >&2
  exit 1
fi
