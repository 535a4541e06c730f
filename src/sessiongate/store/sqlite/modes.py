"""Enabled modes and mode unlocks in the SQLite database."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sessiongate.core.modes import ModeUnlock
from sessiongate.core.users import User
from sessiongate.store.modes import UNLOCK_COLUMNS, unlock_from_row
from sessiongate.store.sqlite.rows import dumps, from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

_COLUMNS_OF_M = ", ".join(f"m.{c.strip()}" for c in UNLOCK_COLUMNS.split(","))

# The join keeps the user row when no unlock matches (an enabled mode still locked), and
# its ON clause is what the (user_name, mode, expires_at) index answers.
_ACCESS = f"""
SELECT u.modes, {_COLUMNS_OF_M}
FROM users u
LEFT JOIN mode_unlocks m
    ON m.user_name = u.name AND m.mode = :mode AND m.expires_at > :now
    AND (m.locked_at IS NULL OR m.locked_at > :now)
WHERE u.name = :user
"""

# Locks what holds at `now` and nothing else: an unlock already locked keeps the first
# lock's time and author.
_LOCK = f"""
UPDATE mode_unlocks SET locked_at = :now, locked_by = :by
WHERE user_name = :user AND mode = :mode
    AND expires_at > :now AND unlocked_at <= :now AND locked_at IS NULL
RETURNING {UNLOCK_COLUMNS}
"""

_LOCK_DISABLED = """
UPDATE mode_unlocks SET locked_at = :now, locked_by = :by
WHERE user_name = :user AND mode NOT IN (SELECT value FROM json_each(:modes))
    AND expires_at > :now AND unlocked_at <= :now AND locked_at IS NULL
"""


class SQLiteModeStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def set_enabled(
        self, user_name: str, modes: Sequence[str], now: datetime, by: str
    ) -> User | None:
        listed = dumps(list(modes))
        with self._store.transaction() as db:
            row = db.execute(
                "UPDATE users SET modes = ? WHERE name = ?"
                " RETURNING name, is_primary, is_admin, modes",
                (listed, user_name),
            ).fetchone()
            if row is None:
                return None
            db.execute(
                _LOCK_DISABLED,
                {"now": to_micros(now), "by": by, "user": user_name, "modes": listed},
            )
        return User(str(row[0]), bool(row[1]), bool(row[2]), tuple(json.loads(row[3])))

    async def enabled(self, user_name: str) -> tuple[str, ...] | None:
        row = self._conn.execute("SELECT modes FROM users WHERE name = ?", (user_name,)).fetchone()
        return None if row is None else tuple(json.loads(row[0]))

    async def access(
        self, user_name: str, mode: str, now: datetime
    ) -> tuple[tuple[str, ...], list[ModeUnlock]] | None:
        rows = self._conn.execute(
            _ACCESS, {"mode": mode, "now": to_micros(now), "user": user_name}
        ).fetchall()
        if not rows:
            return None
        enabled = tuple(json.loads(rows[0][0]))
        # A user with no matching unlock comes back as one row of NULL unlock columns.
        return enabled, [_unlock(r, offset=1) for r in rows if r[1] is not None]

    async def add_unlock(self, unlock: ModeUnlock) -> None:
        with self._store.transaction() as db:
            db.execute(
                f"INSERT INTO mode_unlocks ({UNLOCK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    unlock.unlock_id,
                    unlock.user,
                    unlock.mode,
                    to_micros(unlock.unlocked_at),
                    to_micros(unlock.expires_at),
                    unlock.unlocked_by,
                    None if unlock.locked_at is None else to_micros(unlock.locked_at),
                    unlock.locked_by,
                ),
            )

    async def lock(self, user_name: str, mode: str, now: datetime, by: str) -> list[ModeUnlock]:
        with self._store.transaction() as db:
            rows = db.execute(
                _LOCK, {"now": to_micros(now), "by": by, "user": user_name, "mode": mode}
            ).fetchall()
        return sorted((_unlock(r) for r in rows), key=lambda u: u.unlock_id)

    async def holding(self, user_name: str, now: datetime) -> list[ModeUnlock]:
        at = to_micros(now)
        rows = self._conn.execute(
            f"SELECT {UNLOCK_COLUMNS} FROM mode_unlocks"
            " WHERE user_name = ? AND expires_at > ? AND (locked_at IS NULL OR locked_at > ?)"
            " ORDER BY mode, expires_at, unlock_id",
            (user_name, at, at),
        ).fetchall()
        return [_unlock(r) for r in rows]

    async def history(self, user_name: str, limit: int) -> list[ModeUnlock]:
        rows = self._conn.execute(
            f"SELECT {UNLOCK_COLUMNS} FROM mode_unlocks WHERE user_name = ?"
            " ORDER BY unlocked_at DESC, unlock_id DESC LIMIT ?",
            (user_name, limit),
        ).fetchall()
        return [_unlock(r) for r in rows]


def _unlock(row: tuple[Any, ...], offset: int = 0) -> ModeUnlock:
    return unlock_from_row(row, from_micros, offset)
