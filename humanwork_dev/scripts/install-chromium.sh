#!/usr/bin/env bash
# Install Debian's Chromium when it is missing, for the browser tests of tests/browser
# (Playwright drives it through `executable_path`; `playwright install` is never used).
# Idempotent: does nothing when a chromium binary is already on the PATH (or named by
# HUMANWORK_CHROMIUM). Needs root (or sudo) to install.
set -euo pipefail

if [ -n "${HUMANWORK_CHROMIUM:-}" ] && [ -x "${HUMANWORK_CHROMIUM}" ]; then
  exit 0
fi
if command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ]; then
  exit 0
fi

as_root=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    echo "install.sh: Chromium is missing and installing it needs root" >&2
    exit 1
  fi
fi

export DEBIAN_FRONTEND=noninteractive
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends chromium fonts-dejavu-core

if ! command -v chromium >/dev/null 2>&1; then
  echo "install.sh: chromium installed but no chromium binary on the PATH" >&2
  exit 1
fi
