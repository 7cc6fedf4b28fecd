#!/usr/bin/env bash
# Create .venv (once) and install lightrag-ray with its test extras, offline-safe.
# torch is installed first as the CPU build so nothing pulls a multi-GB CUDA build.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.venv"
stamp="$venv/.installed-$(sha1sum "$root/pyproject.toml" | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  echo "[bootstrap] installing into $venv (first run takes a few minutes)" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet --upgrade pip
  "$venv/bin/pip" install --quiet "torch==2.13.0"
  "$venv/bin/pip" install --quiet -e "$root[test]"
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
