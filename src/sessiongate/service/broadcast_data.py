"""What the WebSocket broadcast needs of the data behind it: a finished turn's stored
messages (to rebuild its frames for the sockets that did not see it live) and, with
PostgreSQL, the channel to the other gateway processes. Kept here so the transport
(api/ws/broadcast.py) reaches data only through a service and never names a store."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.core.segments import Message
from sessiongate.store.base import Store

if TYPE_CHECKING:
    from sessiongate.store.postgres.fanout import PostgresFanout

#: A finished turn's messages are looked for among the newest this many of its segment.
FINISHED_WINDOW = 200


class StoredTurns:
    """Reads a finished turn's messages back from the store."""

    def __init__(self, store: Store) -> None:
        self.store = store

    async def turn_messages(self, session_id: object, turn_id: str) -> tuple[list[Message], int]:
        """The stored messages of `turn_id` (among the newest of its segment) and the
        segment's message count; nothing when the segment is unknown."""
        mine: list[Message] = []
        count = 0
        if isinstance(session_id, str):
            segment = await self.store.get_segment(session_id)
            if segment is not None:
                count = segment.message_count
                recent = await self.store.list_messages(
                    session_id, after_seq=max(0, count - FINISHED_WINDOW), limit=FINISHED_WINDOW
                )
                mine = [m for m in recent if m.metadata.get("turn_id") == turn_id]
        return mine, count


def build_fanout(store: Store) -> PostgresFanout | None:
    """With PostgreSQL, turns also travel to the other processes; SQLite serves one."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        return None
    # Imported here so a SQLite gateway never loads the driver.
    from sessiongate.store.postgres.fanout import PostgresFanout
    from sessiongate.store.postgres.store import PostgresStore

    if not isinstance(store, PostgresStore):
        return None
    return PostgresFanout(store)
