"""Seed 001's endpoint rows in the PostgreSQL database; the same answers as
SQLiteEndpointStore."""

from __future__ import annotations

import json
from datetime import datetime

from sessiongate.core.keys import SEED_ENDPOINTS, KeyRef
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

# INSERT … SELECT: no row when the key is gone, so the foreign key never fails a turn.
_RECORD = """
INSERT INTO endpoint_last_key (owner, endpoint, key, at)
SELECT $1, $2, key, $4 FROM session_keys WHERE key = $3
ON CONFLICT (owner, endpoint) DO UPDATE SET key = excluded.key, at = excluded.at
WHERE excluded.at >= endpoint_last_key.at
"""

# A key erased by a path that ran no erase hook is never answered.
_LAST = """
SELECT e.key FROM endpoint_last_key e JOIN session_keys k ON k.key = e.key
WHERE e.owner = $1 AND e.endpoint = $2
"""

# The first segment is the one no rotation created; seq 1 is the first turn's message.
_FIRST = """
SELECT m.metadata FROM segments s
JOIN messages m ON m.segment_id = s.session_id AND m.seq = 1
WHERE s.key = $1 AND s.created_reason IS NULL
"""

_COUNT = """
SELECT m.metadata->>'transport' AS transport, COUNT(*) FROM segments s
JOIN messages m ON m.segment_id = s.session_id AND m.seq = 1
WHERE s.created_reason IS NULL AND m.metadata->>'transport' IN ('claude', 'codex')
GROUP BY 1
"""


class PostgresEndpointStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def record_last_key(self, key: KeyRef, endpoint: str, now: datetime) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(_RECORD, key.owner, endpoint, key.storage_id, utc(now))

    async def last_key(self, owner: str, endpoint: str) -> str | None:
        stored = await self._store.pool.fetchval(_LAST, owner, endpoint)
        return None if stored is None else KeyRef.from_storage_id(str(stored)).name

    async def forget_key(self, key: KeyRef) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute("DELETE FROM endpoint_last_key WHERE key = $1", key.storage_id)

    async def created_through(self, key: KeyRef) -> str | None:
        metadata = await self._store.pool.fetchval(_FIRST, key.storage_id)
        if metadata is None:
            return None
        transport = json.loads(metadata).get("transport")
        return transport if isinstance(transport, str) else ""

    async def count_created_through(self) -> dict[str, int]:
        counts = dict.fromkeys(SEED_ENDPOINTS, 0)
        for row in await self._store.pool.fetch(_COUNT):
            counts[str(row[0])] = int(row[1])
        return counts
