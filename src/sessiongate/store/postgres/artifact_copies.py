"""The artifact copy queue in PostgreSQL; the same answers as the SQLite one. Several
gateway processes share it: a claim takes the oldest due row with FOR UPDATE SKIP LOCKED,
so two senders never take the same row, and moves it past its lease in one statement."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import asyncpg

from sessiongate.core.artifacts import ArtifactCopy, CopyState
from sessiongate.store.artifact_copies import COPY_COLUMNS, CopyJob, copy_from_row, copy_row
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

INSERT_COPY = (
    f"INSERT INTO artifact_copies ({COPY_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)"
)

_CLAIM = f"""
WITH due AS (
    SELECT artifact_id FROM artifact_copies
    WHERE state IN ('pending', 'deleting') AND next_attempt_at <= $2
    ORDER BY next_attempt_at, artifact_id LIMIT 1
    FOR UPDATE SKIP LOCKED
), claimed AS (
    UPDATE artifact_copies c SET attempts = c.attempts + 1, next_attempt_at = $1
    FROM due WHERE c.artifact_id = due.artifact_id
    RETURNING {", ".join("c." + c.strip() for c in COPY_COLUMNS.split(","))}
)
SELECT claimed.*, a.file_name, a.media_type FROM claimed
LEFT JOIN artifacts a ON a.id = claimed.artifact_id AND a.owner = claimed.owner
"""

_AS_CLAIMED = "artifact_id = $1 AND state = $2 AND attempts = $3"


def copy_values(copy: ArtifactCopy) -> tuple[Any, ...]:
    """The row `INSERT_COPY` writes (also used by the artifact store, in its transaction)."""
    return copy_row(copy, utc)


class PostgresArtifactCopyStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def get_copy(self, owner: str, artifact_id: str) -> ArtifactCopy | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {COPY_COLUMNS} FROM artifact_copies WHERE artifact_id = $1 AND owner = $2",
            artifact_id,
            owner,
        )
        return None if row is None else _copy(row)

    async def claim_due(self, now: datetime, lease_until: datetime) -> CopyJob | None:
        async with self._store.transaction(single_statement=True) as db:
            row = await db.fetchrow(_CLAIM, utc(lease_until), utc(now))
        if row is None:
            return None
        return CopyJob(_copy(row), row["file_name"], row["media_type"])

    async def next_due(self) -> datetime | None:
        found = await self._store.pool.fetchval(
            "SELECT min(next_attempt_at) FROM artifact_copies"
            " WHERE state IN ('pending', 'deleting')"
        )
        return None if found is None else utc(found)

    async def settle(
        self,
        claimed: ArtifactCopy,
        state: CopyState,
        *,
        now: datetime,
        next_attempt_at: datetime | None = None,
        last_error: str | None = None,
    ) -> bool:
        due = now if next_attempt_at is None else next_attempt_at
        async with self._store.transaction(single_statement=True) as db:
            status = await db.execute(
                "UPDATE artifact_copies SET state = $4, next_attempt_at = $5,"
                f" last_error = $6, updated_at = $7 WHERE {_AS_CLAIMED}",
                *_claimed(claimed),
                state,
                utc(due),
                last_error,
                utc(now),
            )
        return _one(status)

    async def forget(self, claimed: ArtifactCopy) -> bool:
        async with self._store.transaction(single_statement=True) as db:
            status = await db.execute(
                f"DELETE FROM artifact_copies WHERE {_AS_CLAIMED}", *_claimed(claimed)
            )
        return _one(status)

    async def release(self, claimed: ArtifactCopy, now: datetime) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                "UPDATE artifact_copies SET attempts = attempts - 1, next_attempt_at = $4"
                f" WHERE {_AS_CLAIMED}",
                *_claimed(claimed),
                utc(now),
            )

    async def end_lease(self, claimed: ArtifactCopy, now: datetime) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                "UPDATE artifact_copies SET next_attempt_at = $1"
                " WHERE artifact_id = $2 AND next_attempt_at = $3",
                utc(now),
                claimed.artifact_id,
                utc(claimed.next_attempt_at),
            )

    async def retry_failed(self, now: datetime) -> int:
        async with self._store.transaction(single_statement=True) as db:
            status = await db.execute(
                "UPDATE artifact_copies SET state = 'pending', attempts = 0,"
                " next_attempt_at = $1, updated_at = $1 WHERE state = 'failed'",
                utc(now),
            )
        return int(status.rsplit(" ", 1)[-1])


def _claimed(copy: ArtifactCopy) -> tuple[str, str, int]:
    return (copy.artifact_id, copy.state, copy.attempts)


def _one(status: str) -> bool:
    """Whether an asyncpg command status (`UPDATE 1`, `DELETE 0`) counts one row."""
    return status.rsplit(" ", 1)[-1] == "1"


def _copy(row: asyncpg.Record) -> ArtifactCopy:
    return copy_from_row(row, utc)
