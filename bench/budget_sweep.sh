#!/usr/bin/env bash
# The prompt's budgets (engine.prefix_tokens:engine.suffix_tokens) swept by `specd replay`, a fresh
# daemon for each, then the same typing into llama.cpp's server (bench/llama_replay.py, where
# LLAMA_SERVER names one), in one script, for chars saved per model second (issue 20, item 5):
#   bench/budget_sweep.sh [BUDGETS] [FOLDER] [FILES] [OUT_DIR]
#   (default "1024:0 1536:0", bench/typing, 10, bench-out/budgets); LLAMA_GGUF: the target's GGUF.
set -uo pipefail
cd "$(dirname "$0")/.."
budgets=${1:-1024:0 1536:0}
folder=${2:-bench/typing}
files=${3:-10}
out=${4:-bench-out/budgets}
mkdir -p "$out"
args=("$folder" --files "$files" --cps 8 --pause-ms 1000)
name=$(basename "$folder")
. bench/machine.sh
machine_header
echo "${args[*]}"
config=$(mktemp)
trap 'rm -f "$config"' EXIT
for b in $budgets; do
    printf '[engine]\nprefix_tokens = %s\nsuffix_tokens = %s\n' "${b%%:*}" "${b#*:}" > "$config"
    chmod 600 "$config"
    .venv/bin/specd stop > /dev/null 2>&1
    .venv/bin/specd --config "$config" start > /dev/null 2>&1 || { echo "specd start failed"; exit 1; }
    echo "prefix:suffix $b: $(.venv/bin/specd --config "$config" replay "${args[@]}" --json "$out/${name}_${b/:/_}.json" 2>&1 | head -1)"
    pid=$(pgrep -f "specd.cli --config" | head -1)
    echo "  resident: $(ps -o rss= -p "$pid") kB; $(.venv/bin/specd --config "$config" status 2>&1 | grep -E "passes" | head -1)"
    .venv/bin/specd --config "$config" stop > /dev/null 2>&1
done
if [ -n "${LLAMA_SERVER:-}" ]; then
    echo "llama.cpp: $(.venv/bin/python bench/llama_replay.py "${args[@]}" --gguf "${LLAMA_GGUF:-}" --json "$out/${name}_llama.json" 2>&1 | head -1)"
fi
