"""Compaction records in the SQLite database (store/compactions.py)."""

from __future__ import annotations

from typing import Any

from sessiongate.core.working_set import CompactionRecord
from sessiongate.store.compactions import (
    COLUMNS,
    Stamp,
    compaction_from_row,
    compaction_values,
)
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore


def _record(row: Any) -> CompactionRecord:
    return compaction_from_row(row, from_micros)


class SQLiteCompactionStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def add(self, record: CompactionRecord) -> None:
        with self._store.transaction() as db:
            db.execute(
                f"INSERT INTO compactions ({COLUMNS}) VALUES "
                "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                compaction_values(record, to_micros),
            )

    async def for_segment(self, session_id: str) -> list[CompactionRecord]:
        rows = self._store.connection.execute(
            f"SELECT {COLUMNS} FROM compactions WHERE session_id = ? ORDER BY last_seq, created_at",
            (session_id,),
        ).fetchall()
        return [_record(row) for row in rows]

    async def stamp(self, session_id: str) -> Stamp:
        row = self._store.connection.execute(
            "SELECT count(*), coalesce(sum(reverted), 0) FROM compactions WHERE session_id = ?",
            (session_id,),
        ).fetchone()
        return (int(row[0]), int(row[1])) if row is not None else (0, 0)

    async def set_reverted(self, compaction_id: str, reverted: bool) -> bool:
        with self._store.transaction() as db:
            changed = db.execute(
                "UPDATE compactions SET reverted = ? WHERE compaction_id = ?",
                (int(reverted), compaction_id),
            ).rowcount
        return bool(changed)
