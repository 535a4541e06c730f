"""The final step of erasing a user, in the SQLite database (store/user_erasure.py)."""

from __future__ import annotations

from sessiongate.core.keys import KeyRef
from sessiongate.store.sqlite.store import SQLiteStore
from sessiongate.store.user_erasure import OWNED_TABLES


class SQLiteUserErasureStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def erase_owner_rows(self, owner: str) -> dict[str, int]:
        counts: dict[str, int] = {}
        with self._store.transaction() as db:
            for table, column in OWNED_TABLES:
                # Table and column names come from the constant above, never from input.
                gone = db.execute(f"DELETE FROM {table} WHERE {column} = ?", (owner,)).rowcount
                if gone:
                    counts[table] = gone
        return counts

    async def owned_key_names(self, owner: str) -> list[str]:
        rows = self._store.connection.execute(
            "SELECT key FROM session_keys WHERE owner = ? ORDER BY key", (owner,)
        ).fetchall()
        return [KeyRef.from_storage_id(r[0]).name for r in rows]
