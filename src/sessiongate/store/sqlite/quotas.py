"""Quota counters in the SQLite database (store/quotas.py)."""

from __future__ import annotations

from sessiongate.store.quotas import ADD_SQL, PRUNE_SQL, TAKE_SQL
from sessiongate.store.sqlite.store import SQLiteStore

_PARAMS = {"p1": "?", "p2": "?", "p3": "?", "p4": "?"}
_TAKE = TAKE_SQL.format(**_PARAMS)
_ADD = ADD_SQL.format(**_PARAMS)
_PRUNE = PRUNE_SQL.format(**_PARAMS)


class SQLiteQuotaStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def take(self, user: str, kind: str, window_start: int, limit: int) -> int | None:
        with self._store.transaction() as db:
            row = db.execute(_TAKE, (user, kind, window_start, limit)).fetchone()
            if row is not None and row[0] == 1:
                db.execute(_PRUNE, (user, kind, window_start))
        return None if row is None else int(row[0])

    async def add(self, user: str, kind: str, window_start: int, amount: int) -> int:
        with self._store.transaction() as db:
            used = int(db.execute(_ADD, (user, kind, window_start, amount)).fetchone()[0])
            if used == amount:
                db.execute(_PRUNE, (user, kind, window_start))
        return used

    async def used(self, user: str, kind: str, window_start: int) -> int:
        row = self._store.connection.execute(
            "SELECT used FROM quota_counters WHERE user_name = ? AND kind = ? AND window_start = ?",
            (user, kind, window_start),
        ).fetchone()
        return 0 if row is None else int(row[0])
