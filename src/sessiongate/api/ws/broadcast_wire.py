"""The payloads the WebSocket broadcast sends to the other processes (one NOTIFY each,
store/postgres/fanout.py) and reads back: the envelopes a burst of frames and markers is
grouped into, an envelope cut into pieces under PostgreSQL's NOTIFY limit, and the
pieces joined again. The format is described in api/ws/broadcast.py. Pure: no I/O."""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import orjson

#: PostgreSQL refuses a NOTIFY payload of 8000 bytes or more.
MAX_PAYLOAD_BYTES = 7900
#: Long payloads being put back together at once, at most (the oldest is given up).
MAX_ASSEMBLIES = 64
#: Markers of finished turns sent in one envelope, at most.
MARKERS_PER_ENVELOPE = 20


def encode(envelope: dict[str, Any], chunk_id: int, limit: int = MAX_PAYLOAD_BYTES) -> list[str]:
    """`envelope` as NOTIFY payloads of at most `limit` bytes: itself, or pieces of its
    JSON text (api/ws/broadcast.py describes them) that `Assembler` joins again."""
    text = orjson.dumps(envelope).decode()
    if len(text.encode()) <= limit:
        return [text]
    head = {"v": 1, "o": envelope["o"], "k": envelope.get("k"), "c": chunk_id}
    overhead = len(orjson.dumps({**head, "i": 10**9, "n": 10**9, "p": ""}))
    budget = limit - overhead
    pieces: list[str] = []
    start = 0
    while start < len(text):
        size = min(len(text) - start, budget)
        while True:
            cost = len(orjson.dumps(text[start : start + size])) - 2  # escapes, UTF-8
            if cost <= budget:
                break
            size = max(1, min(size - 1, size * budget // cost))
        pieces.append(text[start : start + size])
        start += size
    count = len(pieces)
    return [
        orjson.dumps({**head, "i": index, "n": count, "p": piece}).decode()
        for index, piece in enumerate(pieces)
    ]


class Assembler:
    """Puts pieces back together, per sending process and chunk id. A piece out of order
    (one was lost: the LISTEN connection dropped) gives up that payload."""

    def __init__(self, limit: int = MAX_ASSEMBLIES) -> None:
        self.limit = limit
        self._parts: OrderedDict[tuple[str, int], list[str]] = OrderedDict()

    def feed(self, piece: dict[str, Any]) -> dict[str, Any] | None:
        ident = (str(piece["o"]), int(piece["c"]))
        index, count = int(piece["i"]), int(piece["n"])
        parts = self._parts.get(ident, [])
        if index != len(parts):
            self._parts.pop(ident, None)
            return None
        parts.append(str(piece["p"]))
        if len(parts) < count:
            self._parts[ident] = parts
            while len(self._parts) > self.limit:
                self._parts.popitem(last=False)
            return None
        self._parts.pop(ident, None)
        whole = orjson.loads("".join(parts))
        return whole if isinstance(whole, dict) else None

    def clear(self) -> None:
        self._parts.clear()


def group_envelopes(items: list[dict[str, Any]], origin: str) -> list[dict[str, Any]]:
    """A burst of queued items (`{"k", "f"}` frames, `{"k", "d"}` markers) as envelopes:
    consecutive frames of one key share an envelope, and consecutive markers of finished
    turns (any keys) another; order is kept."""
    envelopes: list[dict[str, Any]] = []
    for item in items:
        last = envelopes[-1] if envelopes else None
        if "f" in item:
            if last is not None and "f" in last and last["k"] == item["k"]:
                last["f"].append(item["f"])
            else:
                envelopes.append({"v": 1, "o": origin, "k": item["k"], "f": [item["f"]]})
        elif last is not None and "m" in last and len(last["m"]) < MARKERS_PER_ENVELOPE:
            last["m"].append([item["k"], item["d"]])
        else:
            envelopes.append({"v": 1, "o": origin, "m": [[item["k"], item["d"]]]})
    return envelopes
