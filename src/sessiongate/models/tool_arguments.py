"""A streamed tool call's arguments, kept up to a limit: what both HTTP adapters assemble
argument pieces into.

A model can stream a call's arguments without end (a runaway or hostile server sent
10-20 MB of them). Arguments longer than the request's `max_tool_argument_chars` are
never run (agents/tool_steps.py answers the call with an error), so keeping more than
that many characters serves nothing: past the limit the pieces are only counted, and the
call reports its real length beside the head that was kept.
"""

from __future__ import annotations

from sessiongate.models.base import ModelOptions, ToolCallChunk

#: What an adapter keeps of one call's arguments when the request sets no limit (a
#: client's own tools on the OpenAI route): the largest `limits.max_tool_argument_chars`
#: allows, so memory stays bounded whoever asks.
ARGUMENT_CEILING = 10_000_000


def argument_limit(options: ModelOptions) -> int:
    """How much of each call's arguments to keep for a request with `options`."""
    limit = options.max_tool_argument_chars
    return ARGUMENT_CEILING if limit is None else min(limit, ARGUMENT_CEILING)


class ArgumentBuffer:
    """One call's argument pieces: the first `limit` characters kept, all of them counted."""

    __slots__ = ("_kept", "_limit", "size")

    def __init__(self, limit: int) -> None:
        self._kept: list[str] = []
        self._limit = limit
        #: Characters received, kept or not.
        self.size = 0

    def add(self, piece: str) -> None:
        room = self._limit - self.size
        self.size += len(piece)
        if room <= 0:
            return
        self._kept.append(piece if len(piece) <= room else piece[:room])

    @property
    def cut(self) -> bool:
        """Whether pieces past the limit were dropped."""
        return self.size > self._limit

    def text(self) -> str:
        return "".join(self._kept)

    def chunk(self, call_id: str, name: str) -> ToolCallChunk:
        """The whole call; a call without arguments is an empty object (the JSON a tool's
        schema expects), not an empty string the registry would refuse."""
        return ToolCallChunk(call_id, name, self.text() or "{}", self.size if self.cut else None)
