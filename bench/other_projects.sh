#!/usr/bin/env bash
# Six files of three other projects, for `specd replay` and `bench/llama_replay.py` on code that
# nothing in specd was chosen or tuned on (issue 20's held-out check): pygls's workspace
# `text_document.py` and `server.py` (Python, from PyPI), rxjs's `bufferTime.ts` and
# `mergeInternals.ts` (TypeScript, from npm), google/uuid's `uuid.go` and `time.go` (Go, from
# Debian's golang-github-google-uuid-dev). Fetched at pinned versions from the registries this
# machine reaches, copied unchanged (each keeps its licence header where it has one) into OUT_DIR.
#
#   bench/other_projects.sh [OUT_DIR]     # default bench-out/others; prints OUT_DIR
#   specd replay "$(bench/other_projects.sh)" --files 6 --cps 8 --pause-ms 1000
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-bench-out/others}
PYGLS=2.1.1 RXJS=7.8.2 UUID=1.3.0-1
if [ -f "$out/uuid.go" ] && [ -f "$out/time.go" ] && [ -f "$out/server.py" ]; then echo "$out"; exit 0; fi
mkdir -p "$out"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip download --quiet --no-deps --only-binary=:all: "pygls==$PYGLS" -d "$work" 2>/dev/null
python3 -m zipfile -e "$work"/pygls-*.whl "$work/pygls"
cp "$work/pygls/pygls/workspace/text_document.py" "$work/pygls/pygls/server.py" "$out/"
(cd "$work" && npm pack --silent "rxjs@$RXJS" >/dev/null && tar xzf rxjs-*.tgz)
cp "$work/package/src/internal/operators/bufferTime.ts" "$work/package/src/internal/operators/mergeInternals.ts" "$out/"
(cd "$work" && apt-get download -qq "golang-github-google-uuid-dev=$UUID" 2>/dev/null && dpkg -x golang-github-google-uuid-dev_*.deb deb)
cp "$work"/deb/usr/share/gocode/src/github.com/google/uuid/{uuid.go,time.go} "$out/"
echo "$out"
