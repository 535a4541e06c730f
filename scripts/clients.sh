#!/usr/bin/env bash
# Install the outside clients the tests drive against the gateway (tests/test_codex_cli.py:
# Codex CLI, whose Linux binary ships inside its npm package) into .client-tools/, pinned;
# does nothing when they are already there. Prints the Codex CLI's path on its last line
# (empty when npm is missing: that test then skips and says so).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=".client-tools"
spec="@openai/codex@0.171.0"
codex="$dir/node_modules/.bin/codex"
if ! command -v npm >/dev/null 2>&1; then
    echo "npm is not installed: the Codex CLI test will be skipped" >&2
    echo ""
    exit 0
fi
if [ ! -x "$codex" ] || ! grep -q '"version": "0.171.0"' "$dir/node_modules/@openai/codex/package.json"; then
    npm install --silent --no-audit --no-fund --prefix "$dir" "$spec" >&2
fi
echo "$PWD/$codex"
