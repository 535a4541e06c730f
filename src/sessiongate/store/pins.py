"""The PinStore protocol: the working set's pins (DESIGN.md §12). A pin keeps one message
raw in every context of its segment; it names the message by segment and seq and leaves
the message as it was. Erased with its segment.

Each pin and unpin that changes something also adds one to the segment's version (table
`pin_versions`, in the same transaction), so a process that keeps a segment's pins in
memory learns in one small query whether another process changed them since it read
them (`stamp`)."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sessiongate.core.segments import Message

#: What changes whenever a segment's pins change: its version (one more at each pin and
#: unpin; an unpin then a pin leaves the count alone) and how many pins it has (pins an
#: import writes, and the erasure of the segment, move the count).
PinStamp = tuple[int, int]


def stamp_after(stamp: PinStamp, added: int) -> PinStamp:
    """The stamp once this process alone pinned (`added` 1) or unpinned (-1) one more."""
    return (stamp[0] + 1, stamp[1] + added)


class PinStore(Protocol):
    async def pin(self, session_id: str, seq: int, now: datetime) -> bool:
        """Pin a message; whether it was not pinned already (then the version moves)."""
        ...

    async def unpin(self, session_id: str, seq: int) -> bool:
        """Whether it was pinned (then the version moves)."""
        ...

    async def pinned(self, session_id: str) -> list[Message]:
        """The segment's pinned messages, oldest first."""
        ...

    async def pin_times(self, session_id: str) -> dict[int, datetime]:
        """When each pinned seq of the segment was pinned."""
        ...

    async def stamp(self, session_id: str) -> PinStamp:
        """The segment's version and pin count, read by the database in one small query
        (0, 0 for a segment never pinned)."""
        ...
