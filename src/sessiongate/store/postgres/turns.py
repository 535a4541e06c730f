"""The turn lookup (store/turns.py) in the PostgreSQL database, shared by every
worker: a turn of another process is found here, and `key_busy` asks the server whether
any process holds the key's advisory lock (a turn holds it for its whole run)."""

from __future__ import annotations

from sessiongate.core.keys import KeyRef
from sessiongate.store.postgres.locks import lock_id
from sessiongate.store.postgres.rows import message_from_row
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.turns import MAX_TURN_MESSAGES, StoredTurn

#: The indexed expression of migration 0013 (over `messages.metadata`, aliased `m`).
TURN_ID = "(m.metadata ->> 'turn_id')"

FIND_TURN_SQL = (
    "SELECT m.segment_id, m.seq, m.role, m.content, m.status, m.metadata,"
    " m.created_at, s.key, s.archived_at IS NOT NULL"
    " FROM messages m JOIN segments s ON s.session_id = m.segment_id"
    f" WHERE {TURN_ID} = $1 ORDER BY m.segment_id, m.seq LIMIT $2"
)

_LATER_TURN_SQL = (
    "SELECT EXISTS (SELECT 1 FROM messages m WHERE m.segment_id = $1 AND m.seq > $2"
    f" AND {TURN_ID} <> $3)"
)

# A bigint advisory lock shows in pg_locks as two oids, its high and low 32 bits, with
# objsubid 1; `database` keeps another database's equal lock id out.
_KEY_BUSY_SQL = (
    "SELECT EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory'"
    " AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
    " AND classid = $1::bigint::oid AND objid = $2::bigint::oid AND objsubid = 1 AND granted)"
)


class PostgresTurnRecords:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def find_turn(self, owner: str, turn_id: str) -> StoredTurn | None:
        pool = self._store.pool
        rows = await pool.fetch(FIND_TURN_SQL, turn_id, MAX_TURN_MESSAGES)
        # Owner scoping: a segment's key is `owner/name`.
        rows = [row for row in rows if KeyRef.from_storage_id(row[7]).owner == owner]
        if not rows:
            return None
        session_id = rows[-1][0]  # one segment per turn; the latest if ever more
        rows = [row for row in rows if row[0] == session_id]
        messages = tuple(message_from_row(row) for row in rows)
        later = await pool.fetchval(_LATER_TURN_SQL, session_id, messages[-1].seq, turn_id)
        return StoredTurn(
            turn_id=turn_id,
            key=KeyRef.from_storage_id(rows[-1][7]),
            session_id=session_id,
            messages=messages,
            superseded=bool(rows[-1][8]) or bool(later),
        )

    async def key_busy(self, key: KeyRef) -> bool:
        ident = lock_id(key.storage_id) & 0xFFFF_FFFF_FFFF_FFFF
        busy = await self._store.pool.fetchval(_KEY_BUSY_SQL, ident >> 32, ident & 0xFFFF_FFFF)
        return bool(busy)
