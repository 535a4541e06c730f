"""Retention queries over the PostgreSQL store, and the run lock: a session-level
`pg_try_advisory_lock` held on a connection of the run's own for the whole run, so among
all gateway processes sharing the database (and `sessiongate gc`) one run goes at a
time."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import Any

import asyncpg

from sessiongate.core.keys import KeyRef
from sessiongate.store.postgres.locks import HOLDER_SETTINGS
from sessiongate.store.postgres.rows import CONNECT_TIMEOUT_SECONDS, utc
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.retention import IdleKey

# The two-int key space of advisory locks, apart from the per-key locks' bigints; (…, 1)
# is the migrations' lock.
RETENTION_LOCK = (0x5347, 2)  # "SG", retention


class PostgresRetentionStore:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def idle_keys(self, cutoff: datetime, *, with_context: bool, limit: int) -> list[IdleKey]:
        sql = (
            "SELECT k.key, s.last_activity_at FROM session_keys k"
            " JOIN segments s ON s.session_id = k.latest_session_id"
            " WHERE s.last_activity_at < $1"
        )
        if with_context:
            sql += " AND (s.message_count > s.cleared_after_seq OR cardinality(s.continues) > 0)"
        sql += " ORDER BY s.last_activity_at, k.key LIMIT $2"
        rows = await self._store.pool.fetch(sql, utc(cutoff), limit)
        return [IdleKey(KeyRef.from_storage_id(r[0]), r[1]) for r in rows]

    @asynccontextmanager
    async def exclusive_run(self) -> AsyncIterator[bool]:
        # A connection of its own, not one of the pools': the run itself needs those (a
        # pool of one would otherwise deadlock), and the lock ends with the connection if
        # the process dies.
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            self._store.url,
            timeout=CONNECT_TIMEOUT_SECONDS,
            server_settings=HOLDER_SETTINGS,  # a vanished host's run lock ends in seconds
        )
        try:
            held = await conn.fetchval("SELECT pg_try_advisory_lock($1, $2)", *RETENTION_LOCK)
            yield bool(held)
        finally:
            await conn.close()  # closing the session releases its advisory locks
