"""Seed 001's endpoint rows in the SQLite database (store/endpoints.py)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from sessiongate.core.keys import SEED_ENDPOINTS, KeyRef
from sessiongate.store.sqlite.rows import to_micros
from sessiongate.store.sqlite.store import SQLiteStore

# INSERT … SELECT: no row when the key is gone, so the foreign key never fails a turn.
_RECORD = """
INSERT INTO endpoint_last_key (owner, endpoint, key, at)
SELECT :owner, :endpoint, key, :at FROM session_keys WHERE key = :key
ON CONFLICT (owner, endpoint) DO UPDATE SET key = excluded.key, at = excluded.at
WHERE excluded.at >= endpoint_last_key.at
"""

# A key erased by a path that ran no erase hook is never answered.
_LAST = """
SELECT e.key FROM endpoint_last_key e JOIN session_keys k ON k.key = e.key
WHERE e.owner = ? AND e.endpoint = ?
"""

# The first segment is the one no rotation created; seq 1 is the first turn's message.
_FIRST = """
SELECT m.metadata FROM segments s
JOIN messages m ON m.segment_id = s.session_id AND m.seq = 1
WHERE s.key = ? AND s.created_reason IS NULL
"""

_COUNT = """
SELECT json_extract(m.metadata, '$.transport') AS transport, COUNT(*) FROM segments s
JOIN messages m ON m.segment_id = s.session_id AND m.seq = 1
WHERE s.created_reason IS NULL AND transport IN ('claude', 'codex')
GROUP BY transport
"""


class SQLiteEndpointStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def record_last_key(self, key: KeyRef, endpoint: str, now: datetime) -> None:
        with self._store.transaction() as db:
            db.execute(
                _RECORD,
                {
                    "owner": key.owner,
                    "endpoint": endpoint,
                    "key": key.storage_id,
                    "at": to_micros(now),
                },
            )

    async def last_key(self, owner: str, endpoint: str) -> str | None:
        row = self._conn.execute(_LAST, (owner, endpoint)).fetchone()
        return None if row is None else KeyRef.from_storage_id(str(row[0])).name

    async def forget_key(self, key: KeyRef) -> None:
        with self._store.transaction() as db:
            db.execute("DELETE FROM endpoint_last_key WHERE key = ?", (key.storage_id,))

    async def created_through(self, key: KeyRef) -> str | None:
        row = self._conn.execute(_FIRST, (key.storage_id,)).fetchone()
        if row is None:
            return None
        transport = json.loads(row[0]).get("transport")
        return transport if isinstance(transport, str) else ""

    async def count_created_through(self) -> dict[str, int]:
        counts = dict.fromkeys(SEED_ENDPOINTS, 0)
        for transport, count in self._conn.execute(_COUNT):
            counts[str(transport)] = int(count)
        return counts
