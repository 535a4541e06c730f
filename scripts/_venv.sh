# Sourced by the scripts: make .venv exist and hold the project with the given extras.
# Reinstalls only when pyproject.toml changes. scripts/test asks for "dev", which brings
# the test servers too (wsgidav and cheroot for the WebDAV tests, piper-tts and its voice,
# langchain-openai for the client tests): see pyproject.toml.
set -euo pipefail
extras="${1:-}"
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
fi
stamp=".venv/.installed-$(sha256sum pyproject.toml | cut -c1-16)${extras:+-$extras}"
if [ ! -f "$stamp" ]; then
    .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
    touch "$stamp"
fi
