#!/usr/bin/env bash
# Run the test suite: installs everything into .venv on first use (see bootstrap.sh).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/bootstrap.sh"
export RAY_AUTH_MODE=disabled HF_HUB_OFFLINE=1
cd "$root"
exec "$root/.venv/bin/python" -m pytest -q "$@"
