#!/usr/bin/env bash
# Builds the extension into editors/vscode/specd.vsix: npm ci (the locked dependencies), then
# vsce package, whose prepublish step type-checks with tsc and bundles with esbuild.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund --loglevel=error
npm run --silent package
