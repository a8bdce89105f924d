#!/usr/bin/env bash
# `specd bench` on an earlier commit and then on this checkout, with the same arguments, in one
# script (the commit from a worktree of its own: bench/worktree.sh):
#   bench/bench_ab.sh COMMIT [SPECD BENCH ARGUMENTS...]
#   bench/bench_ab.sh 0eae5a8 --cases bench/cases.jsonl --limit 4 --modes none,lookup
set -uo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: bench/bench_ab.sh COMMIT [SPECD BENCH ARGUMENTS...]}
shift
. bench/worktree.sh
worktree_at "$commit"
. bench/machine.sh
machine_header
for side in before after; do
  if [ $side = before ]; then export PYTHONPATH=$base; label=$commit; else unset PYTHONPATH; label=$(git describe --always --dirty); fi
  echo "== $side ($label): specd bench $*"
  .venv/bin/specd bench "$@" 2>&1 | grep -v USDT
done
