"""The turn lookup (store/turns.py) in the SQLite database.

Only one process uses a SQLite file (several workers need PostgreSQL), so a turn this
process does not hold in memory is not running anywhere: `key_busy` is always False.
"""

from __future__ import annotations

from sessiongate.core.keys import KeyRef
from sessiongate.store.sqlite.rows import message_from_row
from sessiongate.store.sqlite.store import SQLiteStore
from sessiongate.store.turns import MAX_TURN_MESSAGES, StoredTurn

#: The indexed expression of migration 0015 (over `messages.metadata`, aliased `m`).
TURN_ID = "json_extract(m.metadata, '$.turn_id')"

FIND_TURN_SQL = (
    "SELECT m.segment_id, m.seq, m.role, m.content, m.status, m.metadata, m.created_at,"
    " s.key, s.archived_at IS NOT NULL"
    " FROM messages m JOIN segments s ON s.session_id = m.segment_id"
    f" WHERE {TURN_ID} = ? ORDER BY m.segment_id, m.seq LIMIT ?"
)

_LATER_TURN_SQL = (
    f"SELECT 1 FROM messages m WHERE m.segment_id = ? AND m.seq > ? AND {TURN_ID} <> ? LIMIT 1"
)


class SQLiteTurnRecords:
    """Shares the session store's connection."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def find_turn(self, owner: str, turn_id: str) -> StoredTurn | None:
        conn = self._store.connection
        rows = conn.execute(FIND_TURN_SQL, (turn_id, MAX_TURN_MESSAGES)).fetchall()
        # Owner scoping: a segment's key is `owner/name`.
        rows = [row for row in rows if KeyRef.from_storage_id(row[7]).owner == owner]
        if not rows:
            return None
        session_id = rows[-1][0]  # one segment per turn; the latest if ever more
        rows = [row for row in rows if row[0] == session_id]
        messages = tuple(message_from_row(row) for row in rows)
        archived = bool(rows[-1][8])
        later = conn.execute(_LATER_TURN_SQL, (session_id, messages[-1].seq, turn_id)).fetchone()
        return StoredTurn(
            turn_id=turn_id,
            key=KeyRef.from_storage_id(rows[-1][7]),
            session_id=session_id,
            messages=messages,
            superseded=archived or later is not None,
        )

    async def key_busy(self, key: KeyRef) -> bool:
        return False
