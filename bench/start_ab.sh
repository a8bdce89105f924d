#!/usr/bin/env bash
# `specd start` with everything cached, an earlier commit against this checkout, alternating in one
# run (this VM's pace moves 10-20% from minute to minute, so one side never runs all its starts in
# a slow minute): bench/start_ab.sh COMMIT [ROUNDS]. The commit runs from a worktree of its own,
# put first on PYTHONPATH (ahead of the editable install), with its own build of the kernels where
# its C sources differ. Each start: the CLI's own "started in" line and the daemon's RSS then.
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: bench/start_ab.sh COMMIT [ROUNDS]}
rounds=${2:-4}
specd_stop() { .venv/bin/specd stop > /dev/null 2>&1 || true; }
. bench/worktree.sh
worktree_at "$commit"
. bench/machine.sh
machine_header
specd_stop
for i in $(seq "$rounds"); do
  for side in before after; do
    if [ $side = before ]; then export PYTHONPATH=$base; else unset PYTHONPATH; fi
    line=$(.venv/bin/specd start 2>&1 | tail -1)
    pid=$(sed -n 's/.*(pid \([0-9]*\).*/\1/p' <<< "$line")
    echo "$side ($([ $side = before ] && echo "$commit" || git describe --always --dirty)): $line; rss $(ps -o rss= -p "$pid") kB"
    specd_stop
  done
done
