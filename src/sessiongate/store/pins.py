"""The PinStore protocol: the working set's pins (DESIGN.md §12). A pin keeps one message
raw in every context of its segment; it names the message by segment and seq and leaves
the message as it was. Erased with its segment."""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sessiongate.core.segments import Message


class PinStore(Protocol):
    async def pin(self, session_id: str, seq: int, now: datetime) -> bool:
        """Pin a message; whether it was not pinned already."""
        ...

    async def unpin(self, session_id: str, seq: int) -> bool:
        """Whether it was pinned."""
        ...

    async def pinned(self, session_id: str) -> list[Message]:
        """The segment's pinned messages, oldest first."""
        ...

    async def pin_times(self, session_id: str) -> dict[int, datetime]:
        """When each pinned seq of the segment was pinned."""
        ...
