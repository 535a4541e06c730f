"""Artifact rows in the PostgreSQL database, with their WebDAV copies' rows in the same
transactions (store/artifact_copies.py)."""

from __future__ import annotations

import asyncpg

from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.store.artifacts import ARTIFACT_COLUMNS, artifact_from_row
from sessiongate.store.postgres.artifact_copies import INSERT_COPY, copy_values
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore


class PostgresArtifactStore:
    """Shares the session store's pool; the same answers as SQLiteArtifactStore."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def add_artifact(self, artifact: Artifact, copy: ArtifactCopy | None = None) -> None:
        async with self._store.transaction(single_statement=copy is None) as db:
            await db.execute(
                f"INSERT INTO artifacts ({ARTIFACT_COLUMNS})"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                artifact.artifact_id,
                artifact.owner,
                artifact.key,
                artifact.turn_id,
                artifact.media_type,
                artifact.size,
                artifact.sha256,
                utc(artifact.created_at),
                artifact.file_name,
            )
            if copy is not None:
                await db.execute(INSERT_COPY, *copy_values(copy))

    async def get_artifact(self, owner: str, artifact_id: str) -> Artifact | None:
        row = await self._store.pool.fetchrow(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE id = $1 AND owner = $2",
            artifact_id,
            owner,
        )
        return None if row is None else _row_artifact(row)

    async def artifacts_of_key(self, owner: str, key: str) -> list[Artifact]:
        rows = await self._store.pool.fetch(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE owner = $1 AND key = $2 ORDER BY id",
            owner,
            key,
        )
        return [_row_artifact(r) for r in rows]

    async def list_artifacts(
        self, owner: str, key: str, *, turn_id: str | None, media_type: str | None, limit: int
    ) -> list[Artifact]:
        rows = await self._store.pool.fetch(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE owner = $1 AND key = $2"
            " AND ($3::text IS NULL OR turn_id = $3) AND ($4::text IS NULL OR media_type = $4)"
            " ORDER BY created_at DESC, id DESC LIMIT $5",
            owner,
            key,
            turn_id,
            media_type,
            limit,
        )
        return [_row_artifact(r) for r in rows]

    async def artifacts_of_owner(self, owner: str) -> list[Artifact]:
        rows = await self._store.pool.fetch(
            f"SELECT {ARTIFACT_COLUMNS} FROM artifacts WHERE owner = $1 ORDER BY id", owner
        )
        return [_row_artifact(r) for r in rows]

    async def delete_artifacts(
        self, owner: str, artifact_ids: list[str], *, delete_copies: bool = True
    ) -> None:
        if not artifact_ids:
            return
        copies = (
            "UPDATE artifact_copies SET state = 'deleting', attempts = 0, last_error = NULL"
            if delete_copies
            else "DELETE FROM artifact_copies"
        )
        async with self._store.transaction() as db:
            await db.execute(
                "DELETE FROM artifacts WHERE owner = $1 AND id = ANY($2::text[])",
                owner,
                artifact_ids,
            )
            await db.execute(
                f"{copies} WHERE owner = $1 AND artifact_id = ANY($2::text[])",
                owner,
                artifact_ids,
            )


def _row_artifact(row: asyncpg.Record) -> Artifact:
    return artifact_from_row(row, utc)
