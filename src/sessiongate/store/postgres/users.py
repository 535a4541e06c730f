"""Users and API keys in the PostgreSQL database."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import asyncpg

from sessiongate.core.quotas import QuotaLimits
from sessiongate.core.users import User
from sessiongate.errors import Conflict
from sessiongate.store.postgres.rows import utc, violated
from sessiongate.store.postgres.store import PostgresStore

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection


USER_COLUMNS = "name, is_primary, is_admin, modes, quota_requests_per_minute, quota_tokens_per_day"


class PostgresUserStore:
    """Shares the session store's pool; the same answers as SQLiteUserStore."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def add_user(self, user: User, now: datetime) -> None:
        try:
            async with self._store.transaction() as db:
                if await db.fetchval("SELECT 1 FROM users WHERE name = $1", user.name):
                    raise Conflict(f"user {user.name!r} already exists", code="user_exists")
                if user.primary and await db.fetchval("SELECT 1 FROM users WHERE is_primary"):
                    raise Conflict("there is already a primary user", code="primary_exists")
                await db.execute(
                    "INSERT INTO users (name, is_primary, is_admin, modes, created_at)"
                    " VALUES ($1, $2, $3, $4, $5)",
                    user.name,
                    user.primary,
                    user.admin,
                    list(user.modes),
                    utc(now),
                )
        except Conflict as exc:
            # Another process added the same user (or a primary) between check and insert.
            cause = exc.__cause__
            if isinstance(cause, asyncpg.PostgresError):
                if violated(cause, "users_pkey"):
                    raise Conflict(
                        f"user {user.name!r} already exists", code="user_exists"
                    ) from cause
                if violated(cause, "users_one_primary"):
                    raise Conflict(
                        "there is already a primary user", code="primary_exists"
                    ) from cause
            raise

    async def add_key(self, key_id: str, user_name: str, digest: str, now: datetime) -> None:
        async with self._store.transaction() as db:
            await db.execute(
                "INSERT INTO api_keys (key_id, user_name, digest, created_at)"
                " VALUES ($1, $2, $3, $4)",
                key_id,
                user_name,
                digest,
                utc(now),
            )

    async def find_key(self, key_id: str) -> tuple[User, str] | None:
        """The user and stored digest for an unrevoked key id."""
        row = await self._store.pool.fetchrow(
            "SELECT u.name, u.is_primary, u.is_admin, u.modes, u.quota_requests_per_minute,"
            " u.quota_tokens_per_day, k.digest FROM api_keys k"
            " JOIN users u ON u.name = k.user_name"
            " WHERE k.key_id = $1 AND k.revoked_at IS NULL",
            key_id,
        )
        if row is None:
            return None
        return _user(row), row[6]

    async def get_user(self, name: str) -> User | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {USER_COLUMNS} FROM users WHERE name = $1", name
        )
        return None if row is None else _user(row)

    async def list_users(self) -> list[User]:
        rows = await self._store.pool.fetch(f"SELECT {USER_COLUMNS} FROM users ORDER BY name")
        return [_user(r) for r in rows]

    async def set_quotas(self, name: str, quotas: QuotaLimits) -> User | None:
        row = await self._store.pool.fetchrow(
            "UPDATE users SET quota_requests_per_minute = $2, quota_tokens_per_day = $3"
            f" WHERE name = $1 RETURNING {USER_COLUMNS}",
            name,
            quotas.requests_per_minute,
            quotas.tokens_per_day,
        )
        return None if row is None else _user(row)

    async def active_key_counts(self) -> dict[str, int]:
        rows = await self._store.pool.fetch(
            "SELECT user_name, COUNT(*) FROM api_keys WHERE revoked_at IS NULL GROUP BY user_name"
        )
        return {str(r[0]): int(r[1]) for r in rows}

    async def revoke_keys(self, user_name: str, now: datetime) -> int:
        async with self._store.transaction(single_statement=True) as db:
            return await _revoke(db, user_name, now)

    async def replace_keys(self, key_id: str, user_name: str, digest: str, now: datetime) -> int:
        async with self._store.transaction() as db:
            revoked = await _revoke(db, user_name, now)
            await db.execute(
                "INSERT INTO api_keys (key_id, user_name, digest, created_at)"
                " VALUES ($1, $2, $3, $4)",
                key_id,
                user_name,
                digest,
                utc(now),
            )
        return revoked


async def _revoke(db: Connection, user_name: str, now: datetime) -> int:
    status = await db.execute(
        "UPDATE api_keys SET revoked_at = $1 WHERE user_name = $2 AND revoked_at IS NULL",
        utc(now),
        user_name,
    )
    return int(status.split()[-1])  # "UPDATE <n>"


def _user(row: asyncpg.Record) -> User:
    quotas = QuotaLimits(row[4], row[5])
    return User(str(row[0]), bool(row[1]), bool(row[2]), tuple(row[3]), quotas)
