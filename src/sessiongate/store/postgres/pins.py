"""Pins in the PostgreSQL database: the same answers as SQLitePinStore."""

from __future__ import annotations

from datetime import datetime

from sessiongate.core.segments import Message
from sessiongate.store.pins import PinStamp
from sessiongate.store.postgres.rows import message_from_row, utc
from sessiongate.store.postgres.store import PostgresStore

_BUMP = (
    "INSERT INTO pin_versions (session_id, version) VALUES ($1, 1)"
    " ON CONFLICT (session_id) DO UPDATE SET version = pin_versions.version + 1"
)
_COLUMNS = ", ".join(
    f"m.{c}" for c in ("segment_id", "seq", "role", "content", "status", "metadata", "created_at")
)


class PostgresPinStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def pin(self, session_id: str, seq: int, now: datetime) -> bool:
        async with self._store.transaction() as db:
            status = await db.execute(
                "INSERT INTO pins (session_id, seq, created_at) VALUES ($1, $2, $3)"
                " ON CONFLICT DO NOTHING",
                session_id,
                seq,
                now,
            )
            added = str(status).endswith(" 1")
            if added:
                await db.execute(_BUMP, session_id)
        return added

    async def unpin(self, session_id: str, seq: int) -> bool:
        async with self._store.transaction() as db:
            status = await db.execute(
                "DELETE FROM pins WHERE session_id = $1 AND seq = $2", session_id, seq
            )
            gone = str(status).endswith(" 1")
            if gone:
                await db.execute(_BUMP, session_id)
        return gone

    async def pinned(self, session_id: str) -> list[Message]:
        rows = await self._store.pool.fetch(
            f"SELECT {_COLUMNS} FROM pins p JOIN messages m"
            " ON m.segment_id = p.session_id AND m.seq = p.seq"
            " WHERE p.session_id = $1 ORDER BY p.seq",
            session_id,
        )
        return [message_from_row(row) for row in rows]

    async def pin_times(self, session_id: str) -> dict[int, datetime]:
        rows = await self._store.pool.fetch(
            "SELECT seq, created_at FROM pins WHERE session_id = $1", session_id
        )
        return {int(r[0]): utc(r[1]) for r in rows}

    async def stamp(self, session_id: str) -> PinStamp:
        row = await self._store.pool.fetchrow(
            "SELECT (SELECT version FROM pin_versions WHERE session_id = $1),"
            " (SELECT count(*) FROM pins WHERE session_id = $1)",
            session_id,
        )
        return (int(row[0] or 0), int(row[1])) if row is not None else (0, 0)
