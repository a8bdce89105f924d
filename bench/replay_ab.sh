#!/usr/bin/env bash
# An earlier commit against this checkout on the typing issue 20 measures, then llama.cpp, in one
# script: for each side a fresh daemon (`specd start` after a first start, so everything is cached
# and the start is timed), `specd replay`, its RSS and `specd status`, `specd stop`; then the same
# typing into llama.cpp's server with llama.vim's requests (bench/llama_replay.py, where
# LLAMA_SERVER names one; LLAMA_GGUF the target's GGUF). The commit runs from a worktree of its own
# (bench/worktree.sh: first on PYTHONPATH, its own build of the kernels where they differ).
#   bench/replay_ab.sh COMMIT [FOLDER] [FILES] [OUT_DIR]   (default bench/typing, 10, bench-out/ab)
set -uo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: bench/replay_ab.sh COMMIT [FOLDER] [FILES] [OUT_DIR]}
folder=${2:-bench/typing}
files=${3:-10}
out=${4:-bench-out/ab}
mkdir -p "$out"
args=("$folder" --files "$files" --cps 8 --pause-ms 1000)
specd_stop() { .venv/bin/specd stop > /dev/null 2>&1 || true; }
. bench/worktree.sh
worktree_at "$commit"
. bench/machine.sh
machine_header
echo "${args[*]}"
name=$(basename "$folder")
for side in before after; do
  if [ $side = before ]; then export PYTHONPATH=$base; label=$commit; else unset PYTHONPATH; label=$(git describe --always --dirty); fi
  specd_stop
  .venv/bin/specd start > /dev/null 2>&1 && specd_stop    # the first start measures what a start keeps
  echo "$side ($label): $(.venv/bin/specd start 2>&1 | tail -1)"
  echo "  replay: $(.venv/bin/specd replay "${args[@]}" --json "$out/${name}_$side.json" 2>&1 | head -1)"
  pid=$(pgrep -f "specd.cli --config" | head -1)
  echo "  resident after the replay: $(ps -o rss= -p "$pid") kB"
  .venv/bin/specd status 2>&1 | grep -E "memory|ms by width" | sed 's/^/  /'
  specd_stop
done
unset PYTHONPATH
if [ -n "${LLAMA_SERVER:-}" ]; then
  echo "llama.cpp: $(.venv/bin/python bench/llama_replay.py "${args[@]}" --gguf "${LLAMA_GGUF:-}" --json "$out/${name}_llama.json" 2>&1 | head -1)"
fi
