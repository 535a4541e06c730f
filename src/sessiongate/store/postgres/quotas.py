"""Quota counters in the PostgreSQL database (store/quotas.py): the statement that counts
a request locks its counter row, so concurrent gateways queue on it and each sees the
count the one before left."""

from __future__ import annotations

from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.quotas import ADD_SQL, PRUNE_SQL, TAKE_SQL

_PARAMS = {"p1": "$1", "p2": "$2", "p3": "$3", "p4": "$4"}
_TAKE = TAKE_SQL.format(**_PARAMS)
_ADD = ADD_SQL.format(**_PARAMS)
_PRUNE = PRUNE_SQL.format(**_PARAMS)


class PostgresQuotaStore:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def take(self, user: str, kind: str, window_start: int, limit: int) -> int | None:
        async with self._store.transaction(single_statement=True) as db:
            used = await db.fetchval(_TAKE, user, kind, window_start, limit)
            if used == 1:
                await db.execute(_PRUNE, user, kind, window_start)
        return None if used is None else int(used)

    async def add(self, user: str, kind: str, window_start: int, amount: int) -> int:
        async with self._store.transaction(single_statement=True) as db:
            used = int(await db.fetchval(_ADD, user, kind, window_start, amount))
            if used == amount:
                await db.execute(_PRUNE, user, kind, window_start)
        return used

    async def used(self, user: str, kind: str, window_start: int) -> int:
        value = await self._store.pool.fetchval(
            "SELECT used FROM quota_counters WHERE user_name = $1 AND kind = $2"
            " AND window_start = $3",
            user,
            kind,
            window_start,
        )
        return 0 if value is None else int(value)
