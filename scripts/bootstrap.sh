#!/usr/bin/env bash
# Create .venv (once per pyproject.toml + bootstrap.sh version) and install lightrag-ray with
# its test and bench extras (the tests run the benchmark scripts, plots included). torch is
# installed first as the CPU build so nothing pulls a multi-GB CUDA build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.installed-$(cat "$root/pyproject.toml" "${BASH_SOURCE[0]}" | sha1sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "[bootstrap] installing into $venv (first run takes a few minutes; log: $venv/install.log)" >&2
  python3 -m venv "$venv"
  pip=("$venv/bin/pip" install --disable-pip-version-check)
  if ! { "${pip[@]}" "torch==2.13.0" && "${pip[@]}" -e "$root[test,bench]"; } > "$venv/install.log" 2>&1; then
    tail -40 "$venv/install.log" >&2
    echo "[bootstrap] install failed; see $venv/install.log" >&2
    exit 1
  fi
  rm -f "$venv"/.installed-*
  touch "$stamp"
  echo "[bootstrap] done" >&2
fi
