#!/usr/bin/env bash
# The speech engines the voice tests (tests/test_speech.py) and bench/speech.py run:
# espeak-ng (the `espeak` provider), and the encoders POST /v1/audio/speech uses for mp3
# (lame) and opus (opusenc). Installs the Debian packages that are missing; piper and its
# voice come from PyPI with the project (the `voice` extra, also in `dev`).
#
#   bash scripts/speech.sh
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v espeak-ng >/dev/null 2>&1 || missing+=(espeak-ng)
command -v lame >/dev/null 2>&1 || missing+=(lame)
command -v opusenc >/dev/null 2>&1 || missing+=(opus-tools)
if [ "${#missing[@]}" -gt 0 ]; then
    echo "speech.sh: installing ${missing[*]} (Debian packages)" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq "${missing[@]}" >&2
fi
echo "speech.sh: $(espeak-ng --version | head -n 1)" >&2
