#!/usr/bin/env bash
# Run the test suite: installs everything into .venv on first use (see bootstrap.sh).
#   scripts/test.sh            everything (what CI runs)
#   scripts/test.sh --fast     only tests that need no Ray, Milvus, model or subprocess
#   scripts/test.sh ARGS...    passes ARGS to pytest (files, -k, -x, ...)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
# Debian's chromium + chromedriver for tests/webui_browsers/ (LightRAG's WebUI in a browser)
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  sudo=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $sudo apt-get update -q && $sudo apt-get install -y -q chromium chromium-driver
fi
# Debian's prometheus + promtool for tests/test_monitoring.py; the tests start their own server,
# so the package's service (under systemd, scraping :9090) is stopped and disabled
if ! command -v prometheus >/dev/null || ! command -v promtool >/dev/null; then
  sudo=$([ "$(id -u)" -eq 0 ] || echo sudo)
  $sudo apt-get update -q && $sudo apt-get install -y -q --no-install-recommends prometheus
  if [ -d /run/systemd/system ]; then $sudo systemctl disable --now prometheus; fi
fi
export RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1
cd "$root"
tier=()
if [ "${1:-}" = "--fast" ]; then
  shift
  tier=(-m "not integration")
fi
exec "$root/.venv/bin/python" -m pytest -q "${tier[@]}" "$@"
