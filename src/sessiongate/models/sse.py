"""Server-sent events from a provider's raw body: the `data:` lines, in linear time and
bounded memory. Both HTTP adapters (models/openai/adapter.py,
models/anthropic/adapter.py) read their streams through `data_lines`.

Why not rejoin and resplit a text buffer per network chunk: a line that never ends costs
time quadratic in its length that way (a 25 MB line without a newline took 16 s of CPU,
stalling every other request of the process). Here each arrived byte is searched for a
line end once, the bytes of an unfinished line wait in a list and are joined once when
their line ends, and a line longer than `max_line_bytes` ends the stream with
`StreamLineTooLong` as soon as it passes the limit, however much more the server sends.

Lines end with CRLF, LF or a lone CR (the SSE grammar), also when the CR and the LF of
one CRLF arrive in different network chunks. Comment lines (`:` first) and fields other
than `data` (`event`, `id`, `retry`) are skipped: both providers put everything in the
JSON of one `data:` line per event, whose payload is yielded as soon as its line ends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

from sessiongate.errors import ModelError

#: The longest SSE line a provider may send. A chunk is one line of JSON: the largest
#: real ones carry a whole tool call (a few servers send each call in one piece) or a
#: whole reply (proxies that fake streaming), far below this.
DEFAULT_MAX_LINE_BYTES = 8 * 1024 * 1024


class StreamLineTooLong(ModelError):
    """A line of the model's stream passed the limit: the server is broken or hostile. The
    stream fails like any stream that cannot be parsed; text that came before it is
    kept by the usual rules (the caller decides)."""

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"the model server sent a stream line longer than {limit} bytes",
            code="model_bad_response",
        )
        self.limit = limit


class LineSplitter:
    """Lines (without their line ends) from pieces of bytes, fed in order."""

    __slots__ = ("_after_cr", "_limit", "_pending", "_pending_size", "searched_bytes")

    def __init__(self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> None:
        self._limit = max_line_bytes
        #: The start of a line not ended yet, as it arrived.
        self._pending: list[bytes] = []
        self._pending_size = 0
        #: The last piece ended with CR: an LF first in the next piece ends no line.
        self._after_cr = False
        #: Bytes searched for line ends so far: each fed byte once (tests check it).
        self.searched_bytes = 0

    def feed(self, piece: bytes) -> list[bytes]:
        """The lines `piece` ends; raises `StreamLineTooLong` for a line over the limit,
        ended or not."""
        if self._after_cr and piece.startswith(b"\n"):
            piece = piece[1:]
        self._after_cr = False
        self.searched_bytes += len(piece)
        if b"\r" in piece:
            self._after_cr = piece.endswith(b"\r")
            piece = piece.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = piece.split(b"\n")
        rest = lines.pop()
        if lines and self._pending:
            self._pending.append(lines[0])
            lines[0] = b"".join(self._pending)
            self._pending.clear()
            self._pending_size = 0
        for line in lines:
            if len(line) > self._limit:
                raise StreamLineTooLong(self._limit)
        if rest:
            self._pending.append(rest)
            self._pending_size += len(rest)
            if self._pending_size > self._limit:
                raise StreamLineTooLong(self._limit)
        return lines

    def close(self) -> bytes | None:
        """The last line when the body ended without a line end after it, else None."""
        if not self._pending:
            return None
        line = b"".join(self._pending)
        self._pending.clear()
        self._pending_size = 0
        return line


async def data_lines(
    body: AsyncIterator[bytes], *, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
) -> AsyncIterator[bytes]:
    """The payloads of the stream's `data:` lines (whitespace around them stripped), each
    as soon as its line ends; a last line the body ends without a line end counts too."""
    splitter = LineSplitter(max_line_bytes)
    async for piece in body:
        for line in splitter.feed(piece):
            if line.startswith(b"data:"):
                yield line[5:].strip()
    last = splitter.close()
    if last is not None and last.startswith(b"data:"):
        yield last[5:].strip()
