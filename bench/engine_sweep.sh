#!/usr/bin/env bash
# [engine] settings swept by `specd replay`, a fresh daemon for each (bench/replay_sides.sh), then
# the same typing into llama.cpp's server (where LLAMA_SERVER names one), in one script: how the
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
. bench/replay_sides.sh
machine_header
echo "${args[*]}"
config=$(mktemp)
trap 'rm -f "$config"' EXIT
for v in $variants; do
    { echo "[engine]"; tr ',' '\n' <<< "$v" | sed 's/=/ = /'; } > "$config"
    chmod 600 "$config"
    specd_side "$v" "$out/${name}_${v//[,=]/_}.json" --config "$config" -- "${args[@]}" || exit 1
done
llama_side "$out/${name}_llama.json" "${args[@]}"
for v in $variants; do pair_with_llama "$out/${name}_llama.jsonl" "$out/${name}_${v//[,=]/_}.jsonl"; done
