#!/usr/bin/env bash
# The trigger's delay (trigger.delay_ms) swept on bench/typing, a fresh daemon for each, one
# script: bench/delay_sweep.sh [DELAYS] [OUT_DIR] (default "0 100 250 350", bench-out/).
set -uo pipefail
cd "$(dirname "$0")/.."
delays=${1:-0 100 250 350}
out=${2:-bench-out}
mkdir -p "$out"
. bench/machine.sh
machine_header
for d in $delays; do
  .venv/bin/specd stop > /dev/null 2>&1
  .venv/bin/specd start > /dev/null 2>&1 || { echo "specd start failed"; exit 1; }
  echo "delay $d ms: $(.venv/bin/specd replay bench/typing --files 10 --cps 8 --pause-ms 1000 --delay-ms "$d" \
    --json "$out/delay_$d.json" 2>&1 | head -1)"
done
.venv/bin/specd stop > /dev/null
