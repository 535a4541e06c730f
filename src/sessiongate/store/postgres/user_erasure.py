"""The final step of erasing a user, in the PostgreSQL database
(store/user_erasure.py)."""

from __future__ import annotations

from sessiongate.core.keys import KeyRef
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.user_erasure import OWNED_TABLES


class PostgresUserErasureStore:
    """Shares the session store's pool; the same answers as SQLiteUserErasureStore."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def erase_owner_rows(self, owner: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        async with self._store.transaction() as db:
            for table, column in OWNED_TABLES:
                # Table and column names come from the constant above, never from input.
                status = await db.execute(f"DELETE FROM {table} WHERE {column} = $1", owner)
                gone = int(status.rsplit(" ", 1)[-1])  # "DELETE <count>"
                if gone:
                    counts[table] = gone
        return counts

    async def owned_key_names(self, owner: str) -> list[str]:
        rows = await self._store.pool.fetch(
            "SELECT key FROM session_keys WHERE owner = $1 ORDER BY key", owner
        )
        return [KeyRef.from_storage_id(r[0]).name for r in rows]
