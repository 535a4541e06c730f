"""One output stream of a script, kept to a bounded size while it is read.

A script may print 100 MB; the gateway keeps the first `limit` characters (decoded as
UTF-8 as they arrive, bad bytes replaced), counts the rest without keeping it, and keeps
the last few KiB of bytes besides, to tell a MemoryError at the end of a long traceback.
"""

from __future__ import annotations

import codecs

#: Bytes kept from the end of a stream for diagnosis (not returned as output).
TAIL_BYTES = 4096


class CappedOutput:
    def __init__(self, limit: int) -> None:
        #: At most this many characters are returned, the cut marker included.
        self.limit = limit
        self.total_bytes = 0
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._parts: list[str] = []
        self._kept = 0
        self._full = False
        self._tail = bytearray()

    def feed(self, chunk: bytes) -> None:
        self.total_bytes += len(chunk)
        self._tail += chunk
        del self._tail[:-TAIL_BYTES]
        if self._full:
            return
        text = self._decoder.decode(chunk)
        room = self.limit - self._kept
        if len(text) > room:
            text = text[:room]
            self._full = True
        self._parts.append(text)
        self._kept += len(text)

    @property
    def cut(self) -> bool:
        return self._full

    def text(self) -> str:
        """What the script wrote, or its start and a marker saying how much there was."""
        if not self._full:
            tail = self._decoder.decode(b"", final=True)[: self.limit - self._kept]
            return "".join(self._parts) + tail
        marker = f"\n[output cut: {self.total_bytes} bytes written]"
        return "".join(self._parts)[: max(self.limit - len(marker), 0)] + marker

    def last_line(self) -> str:
        """The last non-empty line of the stream's end (empty when there is none)."""
        lines = self._tail.decode("utf-8", errors="replace").strip().splitlines()
        return lines[-1].strip() if lines else ""
