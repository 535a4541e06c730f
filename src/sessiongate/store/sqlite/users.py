"""Users and API keys in the SQLite database."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime

from sessiongate.core.quotas import QuotaLimits
from sessiongate.core.users import User
from sessiongate.errors import Conflict
from sessiongate.store.sqlite.rows import to_micros
from sessiongate.store.sqlite.store import SQLiteStore

USER_COLUMNS = "name, is_primary, is_admin, modes, quota_requests_per_minute, quota_tokens_per_day"


class SQLiteUserStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def add_user(self, user: User, now: datetime) -> None:
        with self._store.transaction() as db:
            if db.execute("SELECT 1 FROM users WHERE name = ?", (user.name,)).fetchone():
                raise Conflict(f"user {user.name!r} already exists", code="user_exists")
            if user.primary and db.execute("SELECT 1 FROM users WHERE is_primary = 1").fetchone():
                raise Conflict("there is already a primary user", code="primary_exists")
            db.execute(
                "INSERT INTO users (name, is_primary, is_admin, modes, created_at)"
                " VALUES (?, ?, ?, ?, ?)",
                (
                    user.name,
                    int(user.primary),
                    int(user.admin),
                    json.dumps(user.modes),
                    to_micros(now),
                ),
            )

    async def add_key(self, key_id: str, user_name: str, digest: str, now: datetime) -> None:
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO api_keys (key_id, user_name, digest, created_at) VALUES (?, ?, ?, ?)",
                (key_id, user_name, digest, to_micros(now)),
            )

    async def find_key(self, key_id: str) -> tuple[User, str] | None:
        """The user and stored digest for an unrevoked key id."""
        row = self._conn.execute(
            "SELECT u.name, u.is_primary, u.is_admin, u.modes, u.quota_requests_per_minute,"
            " u.quota_tokens_per_day, k.digest FROM api_keys k"
            " JOIN users u ON u.name = k.user_name"
            " WHERE k.key_id = ? AND k.revoked_at IS NULL",
            (key_id,),
        ).fetchone()
        if row is None:
            return None
        return _user(row), row[6]

    async def get_user(self, name: str) -> User | None:
        row = self._conn.execute(
            f"SELECT {USER_COLUMNS} FROM users WHERE name = ?", (name,)
        ).fetchone()
        return None if row is None else _user(row)

    async def list_users(self) -> list[User]:
        rows = self._conn.execute(f"SELECT {USER_COLUMNS} FROM users ORDER BY name").fetchall()
        return [_user(r) for r in rows]

    async def set_quotas(self, name: str, quotas: QuotaLimits) -> User | None:
        with self._store.transaction() as db:
            row = db.execute(
                "UPDATE users SET quota_requests_per_minute = ?, quota_tokens_per_day = ?"
                f" WHERE name = ? RETURNING {USER_COLUMNS}",
                (quotas.requests_per_minute, quotas.tokens_per_day, name),
            ).fetchone()
        return None if row is None else _user(row)

    async def active_key_counts(self) -> dict[str, int]:
        rows = self._conn.execute(
            "SELECT user_name, COUNT(*) FROM api_keys WHERE revoked_at IS NULL GROUP BY user_name"
        ).fetchall()
        return {str(r[0]): int(r[1]) for r in rows}

    async def revoke_keys(self, user_name: str, now: datetime) -> int:
        with self._store.transaction() as db:
            return _revoke(db, user_name, now)

    async def replace_keys(self, key_id: str, user_name: str, digest: str, now: datetime) -> int:
        with self._store.transaction() as db:
            revoked = _revoke(db, user_name, now)
            db.execute(
                "INSERT INTO api_keys (key_id, user_name, digest, created_at) VALUES (?, ?, ?, ?)",
                (key_id, user_name, digest, to_micros(now)),
            )
        return revoked


def _revoke(db: sqlite3.Connection, user_name: str, now: datetime) -> int:
    cursor = db.execute(
        "UPDATE api_keys SET revoked_at = ? WHERE user_name = ? AND revoked_at IS NULL",
        (to_micros(now), user_name),
    )
    return cursor.rowcount


def _user(row: tuple[object, ...]) -> User:
    modes = json.loads(str(row[3]))
    quotas = QuotaLimits(_limit(row[4]), _limit(row[5]))
    return User(str(row[0]), bool(row[1]), bool(row[2]), tuple(modes), quotas)


def _limit(value: object) -> int | None:
    return None if value is None else int(str(value))
