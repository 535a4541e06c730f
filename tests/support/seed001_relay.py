"""A reply model for `sessiongate serve` in the seed 001 tests (provider "command"): the
turn as JSON on stdin, the reply streamed on stdout in several writes.

"long N": N characters mixing ASCII, quotes, newlines and non-ASCII text (so it crosses
PostgreSQL's NOTIFY limit whatever the encoding); anything else: "reply to: <message>".
"""

from __future__ import annotations

import json
import sys
import time

PATTERN = 'line "quoted" \\ é 漢字 🎉\n'


def main() -> None:
    turn = json.load(sys.stdin)
    content = str(turn["messages"][-1]["content"])
    if content.startswith("long "):
        size = int(content.split()[1])
        reply = (PATTERN * (size // len(PATTERN) + 1))[:size]
        pieces = [reply[i : i + 997] for i in range(0, len(reply), 997)]
    else:
        words = f"reply to: {content}".split(" ")
        pieces = [w if i == 0 else " " + w for i, w in enumerate(words)]
    for piece in pieces:
        sys.stdout.write(piece)
        sys.stdout.flush()
        time.sleep(0.005)


if __name__ == "__main__":
    main()
