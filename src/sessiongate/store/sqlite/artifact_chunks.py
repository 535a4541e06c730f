"""Artifact bytes as chunk rows in the SQLite database (store/artifact_bytes.py)."""

from __future__ import annotations

from sessiongate.store.sqlite.store import SQLiteStore


class SQLiteArtifactChunks:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    async def put_chunk(self, artifact_id: str, seq: int, owner: str, data: bytes) -> None:
        with self._store.transaction() as db:
            db.execute(
                "INSERT INTO artifact_chunks (artifact_id, seq, owner, bytes) VALUES (?, ?, ?, ?)",
                (artifact_id, seq, owner, data),
            )

    async def get_chunk(self, artifact_id: str, seq: int) -> bytes | None:
        row = self._store.connection.execute(
            "SELECT bytes FROM artifact_chunks WHERE artifact_id = ? AND seq = ?",
            (artifact_id, seq),
        ).fetchone()
        return None if row is None else bytes(row[0])

    async def delete_chunks(self, artifact_ids: list[str]) -> int:
        with self._store.transaction() as db:
            return sum(
                db.execute("DELETE FROM artifact_chunks WHERE artifact_id = ?", (a,)).rowcount
                for a in artifact_ids
            )
