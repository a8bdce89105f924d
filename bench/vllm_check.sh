#!/usr/bin/env bash
# The team recipe, run for real where a GPU and vLLM are present (the README's "For teams"):
# vLLM serves the built-in target's converted folder with n-gram speculation and prefix caching,
# a daemon of its own (its own socket and state, under a scratch folder) points its `server`
# backend at it, and `specd replay` and `specd stress` run through it. Elsewhere (no GPU, or no
# vLLM importable) it says which is missing and exits 0, so it is safe to call from any script.
#
#   bench/vllm_check.sh [OUT_DIR]      # default bench-out/vllm: each report as JSON there
#   env: VLLM_PORT (default 8011), VLLM_ARGS (more flags for `vllm serve`),
#        VLLM_MODEL (a folder or hub id; default: the built-in target's converted folder)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/vllm}
port=${VLLM_PORT:-8011}
python=${PYTHON:-.venv/bin/python}
specd=(.venv/bin/specd)
served=qwen2.5-coder-1.5b-instruct            # the name the daemon asks for; its FIM family from it

# --- what this machine has -----------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
    echo "vllm_check: no NVIDIA GPU here (nvidia-smi finds none); nothing run"
    exit 0
fi
if ! "$python" -c "import vllm" 2>/dev/null; then
    echo "vllm_check: vLLM is not importable by $python (pip install vllm, or PYTHON=...); nothing run"
    exit 0
fi
folder=$("$python" -c "
from specd.daemon.config import load_config
from specd.models.specs import cached_folder, parse_spec
c = load_config(None)
print(cached_folder(parse_spec(c.models.target, 'target'), c.cache_dir()) or '')" 2>/dev/null)
if [ -z "${VLLM_MODEL:-}" ] && [ -z "$folder" ]; then
    echo "vllm_check: the built-in target is not converted here: run \`specd models pull\` first (or set VLLM_MODEL)"
    exit 1
fi
mkdir -p "$out"
scratch=$(mktemp -d)
vllm_pid=""
cleanup() {
    SPECD_CONFIG="$scratch/config.toml" "${specd[@]}" stop >/dev/null 2>&1
    [ -n "$vllm_pid" ] && kill "$vllm_pid" 2>/dev/null && wait "$vllm_pid" 2>/dev/null
    rm -rf "$scratch"
}
trap cleanup EXIT
echo "gpu: $(nvidia-smi -L | head -1); vllm $("$python" -c 'import vllm; print(vllm.__version__)'); $(git describe --always --dirty); $(date)"

# --- the server: the converted folder without specd's own files (vLLM reads every *.safetensors) --
model=${VLLM_MODEL:-$scratch/model}
if [ -z "${VLLM_MODEL:-}" ]; then
    mkdir -p "$model"
    for f in "$folder"/*; do
        case "$(basename "$f")" in specd-*) ;; *) ln -s "$f" "$model/" ;; esac
    done
fi
"$python" -m vllm.entrypoints.openai.api_server --model "$model" --served-model-name "$served" \
    --host 127.0.0.1 --port "$port" --enable-prefix-caching \
    --speculative-config '{"method": "ngram", "num_speculative_tokens": 8, "prompt_lookup_max": 4}' \
    ${VLLM_ARGS:-} > "$out/vllm.log" 2>&1 &
vllm_pid=$!
for _ in $(seq 600); do
    curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null && break
    kill -0 "$vllm_pid" 2>/dev/null || { echo "vllm_check: vLLM exited at start; its log: $out/vllm.log"; tail -20 "$out/vllm.log"; exit 1; }
    sleep 1
done
curl -sf "http://127.0.0.1:$port/v1/models" >/dev/null || { echo "vllm_check: vLLM not up after 600 s"; exit 1; }

# --- a daemon of its own in front of it ------------------------------------------------------------
cat > "$scratch/config.toml" <<EOF
[daemon]
socket = "$scratch/specd.sock"
state_dir = "$scratch/state"

[backend]
kind = "server"
url = "http://127.0.0.1:$port"
model = "$served"
EOF
chmod 600 "$scratch/config.toml"
export SPECD_CONFIG="$scratch/config.toml"
"${specd[@]}" start 2>&1 | tail -1
"${specd[@]}" replay bench/typing --files 10 --cps 8 --pause-ms 1000 --json "$out/replay_vllm.json" 2>&1 | head -1
"${specd[@]}" stress --clients 8 --cps 20 --seconds 60 --json "$out/stress_vllm.json" 2>&1 | tail -3
"${specd[@]}" status 2>&1 | grep -E "server|requests|taken"
"${specd[@]}" trace 2>&1 | head -12
# a superseded request must stop at the server: vLLM counts aborted requests in its metrics
curl -s "http://127.0.0.1:$port/metrics" | grep -E '^vllm:(request_success_total|num_requests_running)' | head -8
