#!/usr/bin/env bash
# Debian's chromium and chromium-driver, for the web UI's browser tests (no browser downloads).
#   chromium.sh install|status
set -euo pipefail

installed() { command -v chromium >/dev/null && command -v chromedriver >/dev/null; }

install() {
  installed && return 0
  echo "chromium.sh: installing chromium and chromium-driver from Debian's packages" >&2
  if [[ -z "$(ls /var/lib/apt/lists/*Packages* 2>/dev/null | head -1)" ]]; then apt-get update -q >/dev/null; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null
  installed || { echo "chromium.sh: chromium or chromedriver still missing after apt-get" >&2; exit 1; }
}

case "${1:-}" in
  install) install; command -v chromium ;;
  status) if installed; then chromium --version; else echo "not installed"; exit 3; fi ;;
  *) echo "usage: $0 install|status" >&2; exit 2 ;;
esac
