"""Compaction records in the PostgreSQL database: the same answers as
SQLiteCompactionStore."""

from __future__ import annotations

from typing import Any

from sessiongate.core.working_set import CompactionRecord
from sessiongate.store.compactions import (
    COLUMNS,
    Stamp,
    compaction_from_row,
    compaction_values,
)
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore


def _record(row: Any) -> CompactionRecord:
    return compaction_from_row(row, utc)


class PostgresCompactionStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def add(self, record: CompactionRecord) -> None:
        await self._store.pool.execute(
            f"INSERT INTO compactions ({COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            *compaction_values(record, lambda instant: instant),  # asyncpg takes it as is
        )

    async def for_segment(self, session_id: str) -> list[CompactionRecord]:
        rows = await self._store.pool.fetch(
            f"SELECT {COLUMNS} FROM compactions WHERE session_id = $1 "
            "ORDER BY last_seq, created_at",
            session_id,
        )
        return [_record(row) for row in rows]

    async def stamp(self, session_id: str) -> Stamp:
        row = await self._store.pool.fetchrow(
            "SELECT count(*), count(*) FILTER (WHERE reverted) FROM compactions"
            " WHERE session_id = $1",
            session_id,
        )
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    async def set_reverted(self, compaction_id: str, reverted: bool) -> bool:
        status = await self._store.pool.execute(
            "UPDATE compactions SET reverted = $1 WHERE compaction_id = $2",
            reverted,
            compaction_id,
        )
        return str(status).endswith(" 1")
