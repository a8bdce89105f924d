#!/usr/bin/env bash
# bench/typing as issue 20 measures it, in one script: a fresh daemon and `specd replay`
# (bench/replay_sides.sh: the start timed with everything cached, RSS and `specd status` after), then
# the same typing into llama.cpp's server with llama.vim's requests (LLAMA_SERVER, LLAMA_GGUF).
# bench/replay_vs_llama.sh [OUT_DIR] (default bench-out/): each side's report as JSON there.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
mkdir -p "$out"
args=(bench/typing --files 10 --cps 8 --pause-ms 1000)
. bench/machine.sh
. bench/replay_sides.sh
machine_header
specd_side specd "$out/replay_specd.json" -- "${args[@]}"
llama_side "$out/replay_llama.json" "${args[@]}"
pair_with_llama "$out/replay_llama.jsonl" "$out/replay_specd.jsonl"
