"""Enabled modes and mode unlocks in the PostgreSQL database."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import asyncpg

from sessiongate.core.modes import ModeUnlock
from sessiongate.core.users import User
from sessiongate.store.modes import UNLOCK_COLUMNS, unlock_from_row
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

_COLUMNS_OF_M = ", ".join(f"m.{c.strip()}" for c in UNLOCK_COLUMNS.split(","))

# The join keeps the user row when no unlock matches (an enabled mode still locked), and
# its ON clause is what the (user_name, mode, expires_at) index answers.
_ACCESS = f"""
SELECT u.modes, {_COLUMNS_OF_M}
FROM users u
LEFT JOIN mode_unlocks m
    ON m.user_name = u.name AND m.mode = $2 AND m.expires_at > $3
    AND (m.locked_at IS NULL OR m.locked_at > $3)
WHERE u.name = $1
"""

# Locks what holds at `now` and nothing else: an unlock already locked keeps the first
# lock's time and author.
_LOCK = f"""
UPDATE mode_unlocks SET locked_at = $3, locked_by = $4
WHERE user_name = $1 AND mode = $2
    AND expires_at > $3 AND unlocked_at <= $3 AND locked_at IS NULL
RETURNING {UNLOCK_COLUMNS}
"""

_LOCK_DISABLED = """
UPDATE mode_unlocks SET locked_at = $3, locked_by = $4
WHERE user_name = $1 AND NOT (mode = ANY($2::text[]))
    AND expires_at > $3 AND unlocked_at <= $3 AND locked_at IS NULL
"""


class PostgresModeStore:
    """Shares the session store's pool; the same answers as SQLiteModeStore."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def set_enabled(
        self, user_name: str, modes: Sequence[str], now: datetime, by: str
    ) -> User | None:
        listed = list(modes)
        async with self._store.transaction() as db:
            row = await db.fetchrow(
                "UPDATE users SET modes = $2 WHERE name = $1"
                " RETURNING name, is_primary, is_admin, modes",
                user_name,
                listed,
            )
            if row is None:
                return None
            await db.execute(_LOCK_DISABLED, user_name, listed, utc(now), by)
        return User(str(row[0]), bool(row[1]), bool(row[2]), tuple(row[3]))

    async def enabled(self, user_name: str) -> tuple[str, ...] | None:
        row = await self._store.pool.fetchrow("SELECT modes FROM users WHERE name = $1", user_name)
        return None if row is None else tuple(row[0])

    async def access(
        self, user_name: str, mode: str, now: datetime
    ) -> tuple[tuple[str, ...], list[ModeUnlock]] | None:
        rows = await self._store.pool.fetch(_ACCESS, user_name, mode, utc(now))
        if not rows:
            return None
        # A user with no matching unlock comes back as one row of NULL unlock columns.
        return tuple(rows[0][0]), [_unlock(r, offset=1) for r in rows if r[1] is not None]

    async def add_unlock(self, unlock: ModeUnlock) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                f"INSERT INTO mode_unlocks ({UNLOCK_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
                unlock.unlock_id,
                unlock.user,
                unlock.mode,
                utc(unlock.unlocked_at),
                utc(unlock.expires_at),
                unlock.unlocked_by,
                None if unlock.locked_at is None else utc(unlock.locked_at),
                unlock.locked_by,
            )

    async def lock(self, user_name: str, mode: str, now: datetime, by: str) -> list[ModeUnlock]:
        async with self._store.transaction(single_statement=True) as db:
            rows = await db.fetch(_LOCK, user_name, mode, utc(now), by)
        return sorted((_unlock(r) for r in rows), key=lambda u: u.unlock_id)

    async def holding(self, user_name: str, now: datetime) -> list[ModeUnlock]:
        rows = await self._store.pool.fetch(
            f"SELECT {UNLOCK_COLUMNS} FROM mode_unlocks"
            " WHERE user_name = $1 AND expires_at > $2 AND (locked_at IS NULL OR locked_at > $2)"
            " ORDER BY mode, expires_at, unlock_id",
            user_name,
            utc(now),
        )
        return [_unlock(r) for r in rows]

    async def history(self, user_name: str, limit: int) -> list[ModeUnlock]:
        rows = await self._store.pool.fetch(
            f"SELECT {UNLOCK_COLUMNS} FROM mode_unlocks WHERE user_name = $1"
            " ORDER BY unlocked_at DESC, unlock_id DESC LIMIT $2",
            user_name,
            limit,
        )
        return [_unlock(r) for r in rows]


def _unlock(row: asyncpg.Record, offset: int = 0) -> ModeUnlock:
    return unlock_from_row(row, utc, offset)
