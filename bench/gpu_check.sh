#!/usr/bin/env bash
# The GPU check, sized for a short lease: at most 8 minutes on one GPU, no network, with the torch
# and transformers the machine already has (nothing is installed: this checkout's packages are
# put on the path by their installed names). Random weights on the real Qwen2.5-Coder 0.5B, 1.5B
# and 7B shapes: a table of ms per pass, eager against captured, a simulated keystroke and the
# width probe's verdict (bench/gpu_check.py); then the exactness tests on tiny models, on the same
# device (SPECD_TEST_DEVICE).
#
#   bench/gpu_check.sh                  # on the GPU (cuda)
#   bench/gpu_check.sh --device cpu     # on the CPU: 2-layer models, no captured column
#   options: --models 1.5B,7B  --repeats N  --json FILE  --no-tests  --wheels DIR (wheels to put on
#   the path first, e.g. msgspec where the machine lacks it; unpacked into a scratch folder)
set -uo pipefail
cd "$(dirname "$0")/.."
device=cuda tests=1 wheels="" args=()
while [ $# -gt 0 ]; do
    case "$1" in
        --device) device=$2; args+=(--device "$2"); shift 2 ;;
        --no-tests) tests=0; shift ;;
        --wheels) wheels=$2; shift 2 ;;
        *) args+=("$1"); shift ;;
    esac
done
python=${PYTHON:-}
if [ -z "$python" ]; then
    if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
if ! "$python" -c "import specd.decoding" 2>/dev/null; then
    mkdir -p "$scratch/specd"          # specd.decoding etc. from this checkout, as pyproject maps them
    for part in decoding models daemon lsp cli bench; do
        [ -d "$part" ] && ln -s "$PWD/$part" "$scratch/specd/$part"
    done
fi
if [ -n "$wheels" ]; then
    "$python" -m pip install -q --no-index --no-deps --no-compile --target "$scratch" "$wheels"/*.whl || exit 1
fi
export PYTHONPATH="$scratch:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1
export TOKENIZERS_PARALLELISM=false
started=$SECONDS
echo "== timings and probe ($device)"
# 270 s keeps a GPU lease's 8 minutes; a CPU is given longer (an AVX2 CPU without bf16 runs these
# shapes in float32, several times slower than the AMX one the CPU table below was measured on)
limit=270; [ "$device" = cpu ] && limit=600
timeout $limit "$python" bench/gpu_check.py "${args[@]}"
bench=$?
[ $bench -eq 124 ] && echo "gpu_check.py stopped at its $limit s limit"
status=$bench
if [ $tests -eq 1 ]; then
    echo "== exactness tests on tiny models (SPECD_TEST_DEVICE=$device)"
    # -p no:asyncio etc. are not needed: these modules use no plugin; an unknown ini key only warns
    SPECD_TEST_DEVICE=$device timeout 180 "$python" -m pytest -q -p no:cacheprovider -rs \
        tests/decoding/test_exactness.py tests/decoding/test_widths.py tests/decoding/test_graphs.py \
        tests/decoding/test_kvcache.py tests/decoding/test_attention.py tests/decoding/test_determinism.py
    rc=$?
    [ $rc -eq 124 ] && echo "the exactness tests stopped at their 180 s limit"
    [ $rc -ne 0 ] && status=$rc
fi
echo "== gpu_check: $((SECONDS - started)) s, exit $status"
exit $status
