"""Pins in the SQLite database (store/pins.py)."""

from __future__ import annotations

from datetime import datetime

from sessiongate.core.segments import Message
from sessiongate.store.pins import PinStamp
from sessiongate.store.sqlite.rows import from_micros, message_from_row, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

_BUMP = (
    "INSERT INTO pin_versions (session_id, version) VALUES (?, 1)"
    " ON CONFLICT (session_id) DO UPDATE SET version = pin_versions.version + 1"
)
_COLUMNS = ", ".join(
    f"m.{c}" for c in ("segment_id", "seq", "role", "content", "status", "metadata", "created_at")
)


class SQLitePinStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def pin(self, session_id: str, seq: int, now: datetime) -> bool:
        with self._store.transaction() as db:
            added = db.execute(
                "INSERT INTO pins (session_id, seq, created_at) VALUES (?, ?, ?)"
                " ON CONFLICT DO NOTHING",
                (session_id, seq, to_micros(now)),
            ).rowcount
            if added:
                db.execute(_BUMP, (session_id,))
        return bool(added)

    async def unpin(self, session_id: str, seq: int) -> bool:
        with self._store.transaction() as db:
            gone = db.execute(
                "DELETE FROM pins WHERE session_id = ? AND seq = ?", (session_id, seq)
            ).rowcount
            if gone:
                db.execute(_BUMP, (session_id,))
        return bool(gone)

    async def pinned(self, session_id: str) -> list[Message]:
        rows = self._store.connection.execute(
            f"SELECT {_COLUMNS} FROM pins p JOIN messages m"
            " ON m.segment_id = p.session_id AND m.seq = p.seq"
            " WHERE p.session_id = ? ORDER BY p.seq",
            (session_id,),
        ).fetchall()
        return [message_from_row(row) for row in rows]

    async def pin_times(self, session_id: str) -> dict[int, datetime]:
        rows = self._store.connection.execute(
            "SELECT seq, created_at FROM pins WHERE session_id = ?", (session_id,)
        ).fetchall()
        return {int(r[0]): from_micros(r[1]) for r in rows}

    async def stamp(self, session_id: str) -> PinStamp:
        row = self._store.connection.execute(
            "SELECT (SELECT version FROM pin_versions WHERE session_id = ?),"
            " (SELECT count(*) FROM pins WHERE session_id = ?)",
            (session_id, session_id),
        ).fetchone()
        return (int(row[0] or 0), int(row[1])) if row is not None else (0, 0)
