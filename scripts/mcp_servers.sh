#!/usr/bin/env bash
# Install the MCP servers the tests run (tests/test_mcp.py) into .mcp-servers/, pinned;
# does nothing when they are already there. Prints the install directory on its last line.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=".mcp-servers"
packages=(
    "@modelcontextprotocol/server-everything@2026.8.31"
    "@modelcontextprotocol/server-memory@2026.8.31"
)
installed() {
    local spec name version
    for spec in "${packages[@]}"; do
        name="${spec%@*}"
        version="${spec##*@}"
        [ -f "$dir/node_modules/$name/package.json" ] || return 1
        grep -q "\"version\": \"$version\"" "$dir/node_modules/$name/package.json" || return 1
    done
}
if ! command -v npm >/dev/null 2>&1; then
    echo "npm is not installed: the MCP server tests that need node will fail in CI" >&2
elif ! installed; then
    npm install --silent --no-audit --no-fund --prefix "$dir" "${packages[@]}" >&2
fi
echo "$PWD/$dir"
