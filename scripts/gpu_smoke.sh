#!/usr/bin/env bash
# GPU smoke test of `--llm-backend vllm`: index A Christmas Carol (../shared/data/christmas_carol/
# mock_data.txt beside the repository, else the packaged copy) through the ray.data.llm vLLM
# processor on this machine's GPUs, then print the graph's counts and the generated tokens/s.
#
#   scripts/gpu_smoke.sh MODEL [ENGINES] [GPUS_PER_ENGINE]
#
# MODEL: a local HF model directory (or an HF id; not a GGUF file), e.g. /models/Qwen2.5-7B-Instruct.
# ENGINES (1): vLLM engines = extraction.actors; GPUS_PER_ENGINE (1): extraction.num_gpus
# (n > 1 = tensor parallel, 0.5 = two engines per GPU).
# Needs a GPU and an environment with ray[llm] (vLLM) and lightrag-ray installed (the -gpu
# image, or `pip install 'ray[llm]==2.60.0' -e .`); `lightrag-ray` is taken from $PATH, else .venv.
# Tokens/s is over the whole run, engine start-up (model load) included: a lower bound.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
model="${1:?usage: scripts/gpu_smoke.sh MODEL [ENGINES] [GPUS_PER_ENGINE]}"
engines="${2:-1}"
gpus="${3:-1}"
cli="$(command -v lightrag-ray || echo "$root/.venv/bin/lightrag-ray")"
python="$(dirname "$cli")/python"
[ -x "$python" ] || python=python3
data="$root/../shared/data/christmas_carol/mock_data.txt"
[ -f "$data" ] || data="$root/lightrag_ray/data/christmas_carol.txt"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

echo "[gpu-smoke] $data -> $work/ws with $model ($engines engine(s) x $gpus GPU)" >&2
status=0
LIGHTRAG_RAY__EXTRACTION__NUM_GPUS="$gpus" "$cli" index "$data" --workspace "$work/ws" \
  --llm-backend vllm --llm-model "$model" --extraction-actors "$engines" --json > "$work/report.json" || status=$?
"$python" - "$work/report.json" <<'EOF'
import json
import sys

report = json.load(open(sys.argv[1]))
seconds = max(report["seconds"], 1e-9)
print(f"chunks {report['chunks']} (failed {report['chunks_failed']}), entities {report['entities']}, "
      f"relations {report['relations']}, summaries {report['summaries']}")
print(f"LLM requests {report['llm_requests']}, generated tokens {report['llm_completion_tokens']}, "
      f"{report['seconds']:.1f} s: {report['llm_completion_tokens'] / seconds:.0f} tokens/s "
      f"({report['llm_requests'] / seconds:.2f} requests/s, engine start-up included)")
for error in report["errors"]:
    print(f"error: {error['file_path']}: {error['error']}")
EOF
exit "$status"
