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
  pip=("$venv/bin/pip" install --quiet --disable-pip-version-check)
  "${pip[@]}" "torch==2.13.0" 2> >(grep -v "is ignored: it is neither" >&2)
  "${pip[@]}" -e "$root[test]" 2> >(grep -v "is ignored: it is neither" >&2)
  rm -f "$venv"/.installed-*
  touch "$stamp"
fi
