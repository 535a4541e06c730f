"""The turn lookup port: a turn's stored messages by its id, for resuming a turn that this
process does not hold in memory (after a restart, or run by another worker).

A turn's messages carry `metadata.turn_id` (service/turn/pipeline.py writes it on the user message
and on every assistant message); migrations sqlite/0015 and postgres/0013 index it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message

#: More messages than any one turn writes (tool steps included); a bound on what one
#: lookup reads, whatever is stored.
MAX_TURN_MESSAGES = 500


@dataclass(frozen=True, slots=True)
class StoredTurn:
    turn_id: str
    key: KeyRef
    session_id: str
    #: The turn's messages in its segment, in order (user, assistant, tool ones that
    #: carry the turn id).
    messages: tuple[Message, ...]
    #: Another turn wrote after this one in its segment, or the segment was archived (a
    #: later turn rotated): this turn cannot still be running.
    superseded: bool


class TurnRecords(Protocol):
    async def find_turn(self, owner: str, turn_id: str) -> StoredTurn | None:
        """The turn's stored messages, when `owner` ran it (None: unknown, or another
        user's — the caller cannot tell which)."""
        ...

    async def key_busy(self, key: KeyRef) -> bool:
        """Whether a turn may be running on `key` in another process right now (it holds
        the key's lock). Always False for a store only one process uses."""
        ...
