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

bash "$(dirname "$0")/apt-install.sh" chromium fonts-dejavu-core
if ! command -v chromium >/dev/null 2>&1; then
  echo "install-chromium.sh: chromium installed but no chromium binary on the PATH" >&2
  exit 1
fi
