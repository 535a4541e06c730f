"""Idempotency rows in the SQLite database."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

import orjson

from sessiongate.store.idempotency import IdempotencyRecord
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

_COLUMNS = "owner, idem_key, fingerprint, status, result, created_at"


def _record(row: Any) -> IdempotencyRecord:
    return IdempotencyRecord(
        owner=row[0],
        key=row[1],
        fingerprint=row[2],
        status=row[3],
        result=None if row[4] is None else orjson.loads(row[4]),
        created_at=from_micros(row[5]),
    )


class SQLiteIdempotencyStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def claim(
        self, owner: str, key: str, fingerprint: str, now: datetime, stale_before: datetime
    ) -> IdempotencyRecord | None:
        with self._store.transaction() as db:
            db.execute(
                "DELETE FROM idempotency_keys WHERE owner = ? AND idem_key = ?"
                " AND status = 'running' AND created_at < ?",
                (owner, key, to_micros(stale_before)),
            )
            inserted = db.execute(
                f"INSERT INTO idempotency_keys ({_COLUMNS}) VALUES (?, ?, ?, 'running', NULL, ?)"
                " ON CONFLICT (owner, idem_key) DO NOTHING",
                (owner, key, fingerprint, to_micros(now)),
            ).rowcount
            if inserted:
                return None
            row = db.execute(
                f"SELECT {_COLUMNS} FROM idempotency_keys WHERE owner = ? AND idem_key = ?",
                (owner, key),
            ).fetchone()
        return _record(row)

    async def started(self, owner: str, key: str, turn_id: str) -> None:
        """One process uses a SQLite database: its claims are never abandoned."""
        return None

    async def get(self, owner: str, key: str) -> IdempotencyRecord | None:
        row = self._conn.execute(
            f"SELECT {_COLUMNS} FROM idempotency_keys WHERE owner = ? AND idem_key = ?",
            (owner, key),
        ).fetchone()
        return None if row is None else _record(row)

    async def finish(self, owner: str, key: str, result: dict[str, Any]) -> None:
        with self._store.transaction() as db:
            db.execute(
                "UPDATE idempotency_keys SET status = 'done', result = ?"
                " WHERE owner = ? AND idem_key = ?",
                (orjson.dumps(result).decode(), owner, key),
            )

    async def release(self, owner: str, key: str) -> None:
        with self._store.transaction() as db:
            db.execute(
                "DELETE FROM idempotency_keys WHERE owner = ? AND idem_key = ?"
                " AND status = 'running'",
                (owner, key),
            )

    async def prune(self, before: datetime) -> int:
        with self._store.transaction() as db:
            return db.execute(
                "DELETE FROM idempotency_keys WHERE created_at < ?", (to_micros(before),)
            ).rowcount
