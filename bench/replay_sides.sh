# Sourced by the replay scripts (bench/replay_ab.sh, bench/engine_sweep.sh, bench/replay_vs_llama.sh,
# from the repository's root): each side of a replay the way issue 20 measures it, so that every
# script prints the same lines, measured the same way.
#
#   specd_side LABEL JSON [--config FILE] -- REPLAY_ARGS...
# A fresh daemon (a first start fills what a start keeps, so the start printed is a cached one),
# `specd replay REPLAY_ARGS --json JSON` (every keystroke in the .jsonl beside JSON), the daemon's
# resident memory after it and `specd status`'s memory and pass-cost lines, then stopped. The
# daemon is the specd that Python imports: a PYTHONPATH set by the caller (bench/worktree.sh)
# names another commit's.
specd_side() {
    local label=$1 json=$2 pid
    shift 2
    local specd=(.venv/bin/specd)
    if [ "${1:-}" = --config ]; then specd+=(--config "$2"); shift 2; fi
    if [ "${1:-}" = -- ]; then shift; fi
    "${specd[@]}" stop > /dev/null 2>&1
    if ! "${specd[@]}" start > /dev/null 2>&1; then echo "$label: specd start failed"; return 1; fi
    "${specd[@]}" stop > /dev/null 2>&1
    echo "$label: $("${specd[@]}" start 2>&1 | tail -1)"
    echo "  replay: $("${specd[@]}" replay "$@" --json "$json" --records "${json%.json}.jsonl" 2>&1 | head -1)"
    pid=$(pgrep -f "specd.cli --config" | head -1)
    echo "  resident after the replay: $(ps -o rss= -p "$pid") kB"
    "${specd[@]}" status 2>&1 | grep -E "memory|ms by width" | sed 's/^/  /'
    "${specd[@]}" stop > /dev/null 2>&1
}

#   llama_side JSON REPLAY_ARGS...
# The same typing into llama.cpp's server with llama.vim's requests (bench/llama_replay.py), where
# LLAMA_SERVER names a llama-server binary (LLAMA_GGUF: the target's GGUF); it says "skipped" where not.
# Its keystrokes go beside JSON too.
llama_side() {
    local json=$1
    shift
    echo "llama.cpp: $(.venv/bin/python bench/llama_replay.py "$@" --gguf "${LLAMA_GGUF:-}" --json "$json" --records "${json%.json}.jsonl" 2>&1 | head -1)"
}

#   pair_with_llama LLAMA_JSONL SIDE_JSONL...
# Each side's match_rate beside llama.cpp's on the keystrokes both answered (bench/replay_pair.py);
# nothing where llama.cpp did not run after that side (an older run's keystrokes are no pair).
pair_with_llama() {
    local llama=$1
    shift
    for side in "$@"; do
        [ "$llama" -nt "$side" ] || continue
        echo "  $(basename "$side" .jsonl) vs llama.cpp: $(.venv/bin/python -m specd.bench.replay_pair "$side" "$llama" --names specd llama.cpp 2>&1)"
    done
}
