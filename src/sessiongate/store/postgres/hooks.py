"""Webhook deliveries in the PostgreSQL database; the same answers as SQLiteHookStore.

Several gateway processes send from the one queue. A claim is one statement: the due rows
are picked `FOR UPDATE SKIP LOCKED` (a row another process is claiming right now is
skipped, not waited for) and updated in place (one more attempt, `next_attempt_at` moved
to the lease's end), so once it commits no other process sees them as due.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime

import asyncpg

from sessiongate.core.hooks import DeliveryStatus
from sessiongate.store.hooks import DELIVERY_COLUMNS, HookDelivery, delivery_from_row, delivery_row
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

_INSERT = (
    f"INSERT INTO hook_deliveries ({DELIVERY_COLUMNS})"
    f" VALUES ({', '.join(f'${n}' for n in range(1, 14))})"
)

# The newest $2 pending rows of a hook stay; older ones go.
_DROP_OLDEST = """
DELETE FROM hook_deliveries WHERE id IN (
    SELECT id FROM hook_deliveries WHERE hook = $1 AND status = 'pending'
    ORDER BY id DESC OFFSET $2
)
"""

_PRUNE = """
DELETE FROM hook_deliveries WHERE id IN (
    SELECT id FROM hook_deliveries WHERE hook = $1 AND status IN ('delivered', 'failed')
    ORDER BY id DESC OFFSET $2
)
"""

_CLAIM = f"""
UPDATE hook_deliveries AS d SET attempts = d.attempts + 1, next_attempt_at = $1
FROM (
    SELECT id FROM hook_deliveries WHERE status = 'pending' AND next_attempt_at <= $2
    ORDER BY next_attempt_at, id LIMIT $3
    FOR UPDATE SKIP LOCKED
) AS due
WHERE d.id = due.id
RETURNING {", ".join("d." + c.strip() for c in DELIVERY_COLUMNS.split(","))}
"""


class PostgresHookStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def enqueue(
        self, deliveries: Sequence[HookDelivery], queue_sizes: Mapping[str, int]
    ) -> dict[str, int]:
        dropped: dict[str, int] = {}
        async with self._store.transaction() as db:
            await db.executemany(_INSERT, [_values(d) for d in deliveries])
            for hook in sorted({d.hook for d in deliveries}):
                gone = _count(await db.execute(_DROP_OLDEST, hook, queue_sizes[hook]))
                if gone:
                    dropped[hook] = gone
        return dropped

    async def claim_due(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[HookDelivery]:
        async with self._store.transaction(single_statement=True) as db:
            rows = await db.fetch(_CLAIM, utc(lease_until), utc(now), limit)
        return sorted((_delivery(r) for r in rows), key=lambda d: d.delivery_id)

    async def next_due(self) -> datetime | None:
        value = await self._store.pool.fetchval(
            "SELECT min(next_attempt_at) FROM hook_deliveries WHERE status = 'pending'"
        )
        return None if value is None else utc(value)

    async def mark_delivered(self, delivery_id: str, attempts: int, now: datetime) -> bool:
        return await self._finish(
            "UPDATE hook_deliveries SET status = 'delivered', delivered_at = $3,"
            " last_error = NULL WHERE id = $1 AND attempts = $2 AND status = 'pending'",
            delivery_id,
            attempts,
            utc(now),
        )

    async def mark_retry(
        self, delivery_id: str, attempts: int, next_attempt_at: datetime, error: str
    ) -> bool:
        return await self._finish(
            "UPDATE hook_deliveries SET next_attempt_at = $3, last_error = $4"
            " WHERE id = $1 AND attempts = $2 AND status = 'pending'",
            delivery_id,
            attempts,
            utc(next_attempt_at),
            error,
        )

    async def mark_failed(self, delivery_id: str, attempts: int, now: datetime, error: str) -> bool:
        return await self._finish(
            "UPDATE hook_deliveries SET status = 'failed', failed_at = $3, last_error = $4"
            " WHERE id = $1 AND attempts = $2 AND status = 'pending'",
            delivery_id,
            attempts,
            utc(now),
            error,
        )

    async def _finish(self, sql: str, *args: object) -> bool:
        async with self._store.transaction(single_statement=True) as db:
            return _count(await db.execute(sql, *args)) == 1

    async def release(self, claimed: Sequence[HookDelivery], now: datetime) -> None:
        async with self._store.transaction() as db:
            await db.executemany(
                "UPDATE hook_deliveries SET attempts = attempts - 1, next_attempt_at = $1"
                " WHERE id = $2 AND attempts = $3 AND status = 'pending'",
                [(utc(now), d.delivery_id, d.attempts) for d in claimed],
            )

    async def prune_finished(self, hook: str, keep: int) -> int:
        async with self._store.transaction(single_statement=True) as db:
            return _count(await db.execute(_PRUNE, hook, keep))

    async def list_deliveries(
        self, hook: str | None, status: DeliveryStatus | None, limit: int
    ) -> list[HookDelivery]:
        where: list[str] = ["TRUE"]
        params: list[object] = []
        if hook is not None:
            params.append(hook)
            where.append(f"hook = ${len(params)}")
        if status is not None:
            params.append(status)
            where.append(f"status = ${len(params)}")
        rows = await self._store.pool.fetch(
            f"SELECT {DELIVERY_COLUMNS} FROM hook_deliveries WHERE {' AND '.join(where)}"
            f" ORDER BY id DESC LIMIT ${len(params) + 1}",
            *params,
            limit,
        )
        return [_delivery(r) for r in rows]

    async def counts(self) -> dict[str, dict[str, int]]:
        found: dict[str, dict[str, int]] = {}
        rows = await self._store.pool.fetch(
            "SELECT hook, status, count(*) FROM hook_deliveries GROUP BY hook, status"
        )
        for hook, status, count in rows:
            found.setdefault(hook, {})[status] = count
        return found

    async def delete_for_key(self, owner: str, session_key: str) -> int:
        async with self._store.transaction(single_statement=True) as db:
            return _count(
                await db.execute(
                    "DELETE FROM hook_deliveries WHERE owner = $1 AND session_key = $2",
                    owner,
                    session_key,
                )
            )


def _count(status: str) -> int:
    """The row count of a command tag ("UPDATE 1", "DELETE 3")."""
    return int(status.rsplit(" ", 1)[-1])


def _values(d: HookDelivery) -> tuple[object, ...]:
    return delivery_row(d, utc)


def _delivery(row: asyncpg.Record) -> HookDelivery:
    return delivery_from_row(row, utc)
