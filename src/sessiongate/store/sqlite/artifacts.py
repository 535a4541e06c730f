"""Artifact rows in the SQLite database, with their WebDAV copies' rows in the same
transactions (store/artifact_copies.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.store.artifacts import ARTIFACT_COLUMNS, artifact_from_row
from sessiongate.store.sqlite.artifact_copies import INSERT_COPY, copy_values
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore


class SQLiteArtifactStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def add_artifact(self, artifact: Artifact, copy: ArtifactCopy | None = None) -> None:
        with self._store.transaction() as db:
            db.execute(
                f"INSERT INTO artifacts ({ARTIFACT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    artifact.artifact_id,
                    artifact.owner,
                    artifact.key,
                    artifact.turn_id,
                    artifact.media_type,
                    artifact.size,
                    artifact.sha256,
                    to_micros(artifact.created_at),
                    artifact.file_name,
                ),
            )
            if copy is not None:
                db.execute(INSERT_COPY, copy_values(copy))

    async def get_artifact(self, owner: str, artifact_id: str) -> Artifact | None:
        row = self._conn.execute(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE id = ? AND owner = ?",
            (artifact_id, owner),
        ).fetchone()
        return None if row is None else _row_artifact(row)

    async def artifacts_of_key(self, owner: str, key: str) -> list[Artifact]:
        rows = self._conn.execute(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE owner = ? AND key = ? ORDER BY id",
            (owner, key),
        ).fetchall()
        return [_row_artifact(r) for r in rows]

    async def list_artifacts(
        self, owner: str, key: str, *, turn_id: str | None, media_type: str | None, limit: int
    ) -> list[Artifact]:
        rows = self._conn.execute(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE owner = ? AND key = ?"
            " AND (? IS NULL OR turn_id = ?) AND (? IS NULL OR media_type = ?)"
            " ORDER BY created_at DESC, id DESC LIMIT ?",
            (owner, key, turn_id, turn_id, media_type, media_type, limit),
        ).fetchall()
        return [_row_artifact(r) for r in rows]

    async def artifacts_of_owner(self, owner: str) -> list[Artifact]:
        rows = self._conn.execute(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE owner = ? ORDER BY id", (owner,)
        ).fetchall()
        return [_row_artifact(r) for r in rows]

    async def delete_artifacts(
        self, owner: str, artifact_ids: list[str], *, delete_copies: bool = True
    ) -> None:
        if not artifact_ids:
            return
        placeholders = ",".join("?" for _ in artifact_ids)
        copies = (
            "UPDATE artifact_copies SET state = 'deleting', attempts = 0, last_error = NULL"
            if delete_copies
            else "DELETE FROM artifact_copies"
        )
        with self._store.transaction() as db:
            db.execute(
                f"DELETE FROM artifacts WHERE owner = ? AND id IN ({placeholders})",
                (owner, *artifact_ids),
            )
            db.execute(
                f"{copies} WHERE owner = ? AND artifact_id IN ({placeholders})",
                (owner, *artifact_ids),
            )


def _row_artifact(row: tuple[Any, ...]) -> Artifact:
    return artifact_from_row(row, from_micros)
