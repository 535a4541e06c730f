"""The artifact copy queue in the SQLite database (store/artifact_copies.py says what
each answer means). One process owns the file, so a claim is one UPDATE … RETURNING
inside `BEGIN IMMEDIATE`."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from typing import Any

from sessiongate.core.artifacts import ArtifactCopy, CopyState
from sessiongate.store.artifact_copies import COPY_COLUMNS, CopyJob, copy_from_row, copy_row
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

INSERT_COPY = f"INSERT INTO artifact_copies ({COPY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?)"

_CLAIM = f"""
UPDATE artifact_copies SET attempts = attempts + 1, next_attempt_at = ?
WHERE artifact_id = (
    SELECT artifact_id FROM artifact_copies
    WHERE state IN ('pending', 'deleting') AND next_attempt_at <= ?
    ORDER BY next_attempt_at, artifact_id LIMIT 1
)
RETURNING {COPY_COLUMNS}
"""

_AS_CLAIMED = "artifact_id = ? AND state = ? AND attempts = ?"


def copy_values(copy: ArtifactCopy) -> tuple[Any, ...]:
    """The row `INSERT_COPY` writes (also used by the artifact store, in its transaction)."""
    return copy_row(copy, to_micros)


class SQLiteArtifactCopyStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def get_copy(self, owner: str, artifact_id: str) -> ArtifactCopy | None:
        row = self._conn.execute(
            f"SELECT {COPY_COLUMNS} FROM artifact_copies WHERE artifact_id = ? AND owner = ?",
            (artifact_id, owner),
        ).fetchone()
        return None if row is None else _copy(row)

    async def claim_due(self, now: datetime, lease_until: datetime) -> CopyJob | None:
        with self._store.transaction() as db:
            row = db.execute(_CLAIM, (to_micros(lease_until), to_micros(now))).fetchone()
            if row is None:
                return None
            copy = _copy(row)
            found = db.execute(
                "SELECT file_name, media_type FROM artifacts WHERE id = ? AND owner = ?",
                (copy.artifact_id, copy.owner),
            ).fetchone()
        file_name, media_type = (None, None) if found is None else found
        return CopyJob(copy, file_name, media_type)

    async def next_due(self) -> datetime | None:
        row = self._conn.execute(
            "SELECT min(next_attempt_at) FROM artifact_copies"
            " WHERE state IN ('pending', 'deleting')"
        ).fetchone()
        return None if row is None or row[0] is None else from_micros(row[0])

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
        with self._store.transaction() as db:
            return (
                db.execute(
                    "UPDATE artifact_copies SET state = ?, next_attempt_at = ?, last_error = ?,"
                    f" updated_at = ? WHERE {_AS_CLAIMED}",
                    (
                        state,
                        to_micros(due),
                        last_error,
                        to_micros(now),
                        *_claimed(claimed),
                    ),
                ).rowcount
                == 1
            )

    async def forget(self, claimed: ArtifactCopy) -> bool:
        with self._store.transaction() as db:
            return (
                db.execute(
                    f"DELETE FROM artifact_copies WHERE {_AS_CLAIMED}", _claimed(claimed)
                ).rowcount
                == 1
            )

    async def release(self, claimed: ArtifactCopy, now: datetime) -> None:
        with self._store.transaction() as db:
            db.execute(
                "UPDATE artifact_copies SET attempts = attempts - 1, next_attempt_at = ?"
                f" WHERE {_AS_CLAIMED}",
                (to_micros(now), *_claimed(claimed)),
            )

    async def end_lease(self, claimed: ArtifactCopy, now: datetime) -> None:
        with self._store.transaction() as db:
            db.execute(
                "UPDATE artifact_copies SET next_attempt_at = ?"
                " WHERE artifact_id = ? AND next_attempt_at = ?",
                (to_micros(now), claimed.artifact_id, to_micros(claimed.next_attempt_at)),
            )

    async def retry_failed(self, now: datetime) -> int:
        with self._store.transaction() as db:
            return db.execute(
                "UPDATE artifact_copies SET state = 'pending', attempts = 0,"
                " next_attempt_at = ?, updated_at = ? WHERE state = 'failed'",
                (to_micros(now), to_micros(now)),
            ).rowcount


def _claimed(copy: ArtifactCopy) -> tuple[str, str, int]:
    return (copy.artifact_id, copy.state, copy.attempts)


def _copy(row: tuple[Any, ...]) -> ArtifactCopy:
    return copy_from_row(row, from_micros)
