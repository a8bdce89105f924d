#!/usr/bin/env bash
# [engine] settings swept by `specd replay`, a fresh daemon for each, then the same typing into
# llama.cpp's server (bench/llama_replay.py, where LLAMA_SERVER names one), in one script: how the
# prompt's budgets trade chars saved against model time (issue 20, item 5), how
# engine.min_probability trades shown pauses against right ones. Each variant is KEY=VALUE pairs
# joined by commas, written into the config's [engine] section:
#   bench/engine_sweep.sh [VARIANTS] [FOLDER] [FILES] [OUT_DIR]
#   (default "prefix_tokens=1024,suffix_tokens=0 prefix_tokens=1536,suffix_tokens=0", bench/typing,
#   10, bench-out/sweep); LLAMA_GGUF: the target's GGUF.
set -uo pipefail
cd "$(dirname "$0")/.."
variants=${1:-prefix_tokens=1024,suffix_tokens=0 prefix_tokens=1536,suffix_tokens=0}
folder=${2:-bench/typing}
files=${3:-10}
out=${4:-bench-out/sweep}
mkdir -p "$out"
args=("$folder" --files "$files" --cps 8 --pause-ms 1000)
name=$(basename "$folder")
. bench/machine.sh
machine_header
echo "${args[*]}"
config=$(mktemp)
trap 'rm -f "$config"' EXIT
for v in $variants; do
    { echo "[engine]"; tr ',' '\n' <<< "$v" | sed 's/=/ = /'; } > "$config"
    chmod 600 "$config"
    .venv/bin/specd stop > /dev/null 2>&1
    .venv/bin/specd --config "$config" start > /dev/null 2>&1 || { echo "specd start failed for $v"; exit 1; }
    echo "$v: $(.venv/bin/specd --config "$config" replay "${args[@]}" --json "$out/${name}_${v//[,=]/_}.json" 2>&1 | head -1)"
    pid=$(pgrep -f "specd.cli --config" | head -1)
    echo "  resident: $(ps -o rss= -p "$pid") kB; $(.venv/bin/specd --config "$config" status 2>&1 | grep -E "passes" | head -1)"
    .venv/bin/specd --config "$config" stop > /dev/null 2>&1
done
if [ -n "${LLAMA_SERVER:-}" ]; then
    echo "llama.cpp: $(.venv/bin/python bench/llama_replay.py "${args[@]}" --gguf "${LLAMA_GGUF:-}" --json "$out/${name}_llama.json" 2>&1 | head -1)"
fi
