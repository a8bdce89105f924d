#!/usr/bin/env bash
# An earlier commit against this checkout on the typing issue 20 measures, then llama.cpp, in one
# script: for each side a fresh daemon and `specd replay` (bench/replay_sides.sh: the start timed
# with everything cached, RSS and `specd status` after), then the same typing into llama.cpp's
# server with llama.vim's requests (where LLAMA_SERVER names one; LLAMA_GGUF the target's GGUF), and
# each side's keystrokes paired with llama.cpp's (bench/replay_pair.py).
# The commit runs from a worktree of its own (bench/worktree.sh: first on PYTHONPATH, its own build
# of the kernels where they differ).
#   bench/replay_ab.sh COMMIT [FOLDER] [FILES] [OUT_DIR]   (default bench/typing, 10, bench-out/ab)
set -uo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: bench/replay_ab.sh COMMIT [FOLDER] [FILES] [OUT_DIR]}
folder=${2:-bench/typing}
files=${3:-10}
out=${4:-bench-out/ab}
mkdir -p "$out"
args=("$folder" --files "$files" --cps 8 --pause-ms 1000)
. bench/worktree.sh
worktree_at "$commit"
. bench/machine.sh
. bench/replay_sides.sh
machine_header
echo "${args[*]}"
name=$(basename "$folder")
for side in before after; do
  if [ $side = before ]; then export PYTHONPATH=$base; label=$commit; else unset PYTHONPATH; label=$(git describe --always --dirty); fi
  specd_side "$side ($label)" "$out/${name}_$side.json" -- "${args[@]}"
done
unset PYTHONPATH
llama_side "$out/${name}_llama.json" "${args[@]}"
pair_with_llama "$out/${name}_llama.jsonl" "$out/${name}_before.jsonl" "$out/${name}_after.jsonl"
