#!/usr/bin/env bash
# Install the outside clients the tests drive against the gateway (tests/test_codex_cli.py:
# Codex CLI, whose Linux binary ships inside its npm package) into .client-tools/, pinned;
# does nothing when they are already there. Prints the Codex CLI's path on its last line
# (empty when npm is missing: that test then skips and says so).
#
# `bash scripts/clients.sh agents-python` instead installs the OpenAI Agents SDK
# (openai-agents, pinned) into its own venv, .client-tools/agents-venv/ (it needs
# websockets<17, the dev venv has 17), and prints that venv's python on its last line
# (tests/test_agents_sdk.py runs the SDK there, as a subprocess against a served gateway).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=".client-tools"
if [ "${1:-}" = "agents-python" ]; then
    agents_spec="openai-agents==0.24.0"
    venv="$dir/agents-venv"
    if [ ! -x "$venv/bin/python" ]; then
        mkdir -p "$dir"
        python3 -m venv "$venv" >&2
    fi
    if ! "$venv/bin/python" -m pip show openai-agents 2>/dev/null | grep -q '^Version: 0.24.0$'; then
        "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$agents_spec" >&2
    fi
    echo "$PWD/$venv/bin/python"
    exit 0
fi
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
