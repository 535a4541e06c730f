#!/usr/bin/env bash
# What the web page tests (tests/web/) and bench/page_load.py drive: Debian's Chromium
# (installed with apt-get when missing; Playwright's own browser download cannot run
# here) and axe-core from npm (the accessibility check the tests run inside the page),
# pinned, into .web-test/. Prints the axe-core script's path on its last line.
#
#   bash scripts/browser.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v chromium >/dev/null 2>&1; then
    echo "browser.sh: installing chromium (Debian package)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq chromium >&2
fi
echo "browser.sh: $(chromium --version 2>/dev/null | head -n 1)" >&2
dir=".web-test"
axe="axe-core@4.14.1"
script="$dir/node_modules/axe-core/axe.min.js"
if [ ! -f "$script" ] || ! grep -q '"version": "4.14.1"' "$dir/node_modules/axe-core/package.json"; then
    if command -v npm >/dev/null 2>&1; then
        npm install --silent --no-audit --no-fund --prefix "$dir" "$axe" >&2
    else
        echo "browser.sh: npm is not installed: the accessibility test will fail" >&2
    fi
fi
echo "$PWD/$script"
