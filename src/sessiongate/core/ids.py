"""Time-sortable identifiers (UUIDv7, RFC 9562) generated from an injected clock.

Ids made by one generator sort in creation order even within one millisecond or when the
clock steps backwards: the 12-bit `rand_a` field is used as a counter and the timestamp
never goes below the last one issued.
"""

from __future__ import annotations

import os
import re
import threading
import uuid

from sessiongate.core.clock import Clock

_UUID_RE = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


class IdGenerator:
    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._last_ms = -1
        self._counter = 0

    def new(self) -> str:
        ms = int(self._clock.now().timestamp() * 1000)
        with self._lock:
            if ms <= self._last_ms:
                ms = self._last_ms
                self._counter += 1
                if self._counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                    ms += 1
                    self._counter = 0
            else:
                self._counter = 0
            self._last_ms = ms
            counter = self._counter
        rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
        value = (ms & ((1 << 48) - 1)) << 80
        value |= 0x7 << 76
        value |= counter << 64
        value |= 0b10 << 62
        value |= rand_b
        return str(uuid.UUID(int=value))


def is_session_id(value: str) -> bool:
    """True when `value` has the shape of an id this gateway issues (lower-case UUIDv7)."""
    return bool(_UUID_RE.fullmatch(value))
