"""Webhook deliveries in the SQLite database (store/hooks.py says what each answer
means). One process owns the file, so a claim is simply one UPDATE … RETURNING inside
`BEGIN IMMEDIATE`."""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from sessiongate.core.hooks import DeliveryStatus
from sessiongate.store.hooks import DELIVERY_COLUMNS, HookDelivery, delivery_from_row, delivery_row
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

_INSERT = f"INSERT INTO hook_deliveries ({DELIVERY_COLUMNS}) VALUES ({', '.join('?' * 13)})"

# The newest `?` pending rows of a hook stay; older ones go (LIMIT -1: no limit).
_DROP_OLDEST = """
DELETE FROM hook_deliveries WHERE id IN (
    SELECT id FROM hook_deliveries WHERE hook = ? AND status = 'pending'
    ORDER BY id DESC LIMIT -1 OFFSET ?
)
"""

_PRUNE = """
DELETE FROM hook_deliveries WHERE id IN (
    SELECT id FROM hook_deliveries WHERE hook = ? AND status IN ('delivered', 'failed')
    ORDER BY id DESC LIMIT -1 OFFSET ?
)
"""

_CLAIM = f"""
UPDATE hook_deliveries SET attempts = attempts + 1, next_attempt_at = ?
WHERE id IN (
    SELECT id FROM hook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?
    ORDER BY next_attempt_at, id LIMIT ?
)
RETURNING {DELIVERY_COLUMNS}
"""


class SQLiteHookStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def enqueue(
        self, deliveries: Sequence[HookDelivery], queue_sizes: Mapping[str, int]
    ) -> dict[str, int]:
        dropped: dict[str, int] = {}
        with self._store.transaction() as db:
            db.executemany(_INSERT, [_values(d) for d in deliveries])
            for hook in sorted({d.hook for d in deliveries}):
                gone = db.execute(_DROP_OLDEST, (hook, queue_sizes[hook])).rowcount
                if gone:
                    dropped[hook] = gone
        return dropped

    async def claim_due(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[HookDelivery]:
        with self._store.transaction() as db:
            rows = db.execute(_CLAIM, (to_micros(lease_until), to_micros(now), limit)).fetchall()
        claimed = [_delivery(r) for r in rows]
        # RETURNING promises no order: the oldest goes first.
        return sorted(claimed, key=lambda d: d.delivery_id)

    async def next_due(self) -> datetime | None:
        row = self._conn.execute(
            "SELECT min(next_attempt_at) FROM hook_deliveries WHERE status = 'pending'"
        ).fetchone()
        return None if row is None or row[0] is None else from_micros(row[0])

    async def mark_delivered(self, delivery_id: str, attempts: int, now: datetime) -> bool:
        return self._finish(
            "UPDATE hook_deliveries SET status = 'delivered', delivered_at = ?,"
            " last_error = NULL WHERE id = ? AND attempts = ? AND status = 'pending'",
            (to_micros(now), delivery_id, attempts),
        )

    async def mark_retry(
        self, delivery_id: str, attempts: int, next_attempt_at: datetime, error: str
    ) -> bool:
        return self._finish(
            "UPDATE hook_deliveries SET next_attempt_at = ?, last_error = ?"
            " WHERE id = ? AND attempts = ? AND status = 'pending'",
            (to_micros(next_attempt_at), error, delivery_id, attempts),
        )

    async def mark_failed(self, delivery_id: str, attempts: int, now: datetime, error: str) -> bool:
        return self._finish(
            "UPDATE hook_deliveries SET status = 'failed', failed_at = ?, last_error = ?"
            " WHERE id = ? AND attempts = ? AND status = 'pending'",
            (to_micros(now), error, delivery_id, attempts),
        )

    def _finish(self, sql: str, params: tuple[Any, ...]) -> bool:
        with self._store.transaction() as db:
            return db.execute(sql, params).rowcount == 1

    async def release(self, claimed: Sequence[HookDelivery], now: datetime) -> None:
        with self._store.transaction() as db:
            db.executemany(
                "UPDATE hook_deliveries SET attempts = attempts - 1, next_attempt_at = ?"
                " WHERE id = ? AND attempts = ? AND status = 'pending'",
                [(to_micros(now), d.delivery_id, d.attempts) for d in claimed],
            )

    async def prune_finished(self, hook: str, keep: int) -> int:
        with self._store.transaction() as db:
            return db.execute(_PRUNE, (hook, keep)).rowcount

    async def list_deliveries(
        self, hook: str | None, status: DeliveryStatus | None, limit: int
    ) -> list[HookDelivery]:
        where: list[str] = ["1 = 1"]
        params: list[str] = []
        if hook is not None:
            where.append("hook = ?")
            params.append(hook)
        if status is not None:
            where.append("status = ?")
            params.append(status)
        rows = self._conn.execute(
            f"SELECT {DELIVERY_COLUMNS} FROM hook_deliveries WHERE {' AND '.join(where)}"
            " ORDER BY id DESC LIMIT ?",
            (*params, limit),
        ).fetchall()
        return [_delivery(r) for r in rows]

    async def counts(self) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        for hook, status, count in self._conn.execute(
            "SELECT hook, status, count(*) FROM hook_deliveries GROUP BY hook, status"
        ):
            found.setdefault(hook, {})[status] = count
        return found

    async def delete_for_key(self, owner: str, session_key: str) -> int:
        with self._store.transaction() as db:
            return db.execute(
                "DELETE FROM hook_deliveries WHERE owner = ? AND session_key = ?",
                (owner, session_key),
            ).rowcount


def _values(d: HookDelivery) -> tuple[object, ...]:
    return delivery_row(d, to_micros)


def _delivery(row: tuple[Any, ...]) -> HookDelivery:
    return delivery_from_row(row, from_micros)
