#!/usr/bin/env bash
# bench/typing as issue 20 measures it, in one script: `specd start` (timed), `specd replay`, the
# daemon's RSS and `specd status`, `specd stop`; then the same typing into llama.cpp's server with
# llama.vim's requests (bench/llama_replay.py: LLAMA_SERVER, and LLAMA_GGUF the target's GGUF).
# bench/replay_vs_llama.sh [OUT_DIR] (default bench-out/): each side's report as JSON there.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out}
mkdir -p "$out"
args=(bench/typing --files 10 --cps 8 --pause-ms 1000)
. bench/machine.sh
machine_header
.venv/bin/specd stop > /dev/null 2>&1
.venv/bin/specd start 2>&1 | tail -1
.venv/bin/specd replay "${args[@]}" --json "$out/replay_specd.json" 2>&1 | head -1
pid=$(pgrep -f "specd.cli --config" | head -1)
echo "resident after the replay: $(ps -o rss= -p "$pid") kB"
.venv/bin/specd status 2>&1 | grep -E "passes|taken|memory"
.venv/bin/specd stop
.venv/bin/python bench/llama_replay.py "${args[@]}" --gguf "${LLAMA_GGUF:-}" --json "$out/replay_llama.json" 2>&1 | head -1
