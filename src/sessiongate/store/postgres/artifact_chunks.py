"""Artifact bytes as chunk rows (bytea) in the PostgreSQL database, which every gateway
reads (store/artifact_bytes.py): one statement, one round trip, per chunk."""

from __future__ import annotations

from sessiongate.store.postgres.store import PostgresStore


class PostgresArtifactChunks:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def put_chunk(self, artifact_id: str, seq: int, owner: str, data: bytes) -> None:
        async with self._store.transaction(single_statement=True) as db:
            await db.execute(
                "INSERT INTO artifact_chunks (artifact_id, seq, owner, bytes)"
                " VALUES ($1, $2, $3, $4)",
                artifact_id,
                seq,
                owner,
                data,
            )

    async def get_chunk(self, artifact_id: str, seq: int) -> bytes | None:
        value = await self._store.pool.fetchval(
            "SELECT bytes FROM artifact_chunks WHERE artifact_id = $1 AND seq = $2",
            artifact_id,
            seq,
        )
        return None if value is None else bytes(value)

    async def delete_chunks(self, artifact_ids: list[str]) -> int:
        async with self._store.transaction(single_statement=True) as db:
            status = await db.execute(
                "DELETE FROM artifact_chunks WHERE artifact_id = ANY($1::text[])", artifact_ids
            )
        return int(status.split()[-1])  # "DELETE <n>"
