"""The recall index in the SQLite database (store/recall.py's port): FTS5 (bm25) over the
archived messages (`messages_fts`, filled when a segment is archived) and the message
vectors as float32 BLOBs (`message_vectors`, migration 0024). Shares the session store's
connection and transactions.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from sessiongate.core.notes import Vectors
from sessiongate.store.notes import ChunkVectors, vector_bytes, vectors_from
from sessiongate.store.recall import RecallRow, RecallScope, Unembedded
from sessiongate.store.sqlite.notes import fts_match
from sessiongate.store.sqlite.rows import from_micros
from sessiongate.store.sqlite.store import SQLiteStore

#: A message the recall may read: archived, not the offline stand-in's, not UNSAFE.
_RECALLABLE = (
    " JOIN segments s ON s.session_id = m.segment_id"
    " JOIN session_keys k ON k.key = s.key"
    " WHERE k.owner = ? AND s.session_id != k.latest_session_id"
    " AND json_extract(m.metadata, '$.offline') IS NOT 1"
    " AND json_extract(m.metadata, '$.classification.label') IS NOT 'unsafe'"
)


def _where(scope: RecallScope) -> tuple[str, tuple[object, ...]]:
    """The recallable-message condition of `scope` and its parameters, in order."""
    sql = _RECALLABLE
    params: list[object] = [scope.owner]
    if scope.key is not None:
        sql += " AND s.key = ?"
        params.append(scope.key)
    if scope.exclude:
        sql += f" AND s.session_id NOT IN ({','.join('?' for _ in scope.exclude)})"
        params.extend(scope.exclude)
    return sql, tuple(params)


class SQLiteRecallIndex:
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection

    async def keyword(self, scope: RecallScope, words: Sequence[str], depth: int) -> list[int]:
        if not words:
            return []
        where, params = _where(scope)
        rows = self._conn.execute(
            "SELECT m.id FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            f"{where} AND messages_fts MATCH ? ORDER BY bm25(messages_fts), m.id LIMIT ?",
            (*params, fts_match(words), depth),
        ).fetchall()
        return [int(r[0]) for r in rows]

    async def vectors(self, scope: RecallScope, embedder: str, dimensions: int) -> ChunkVectors:
        where, params = _where(scope)
        rows = self._conn.execute(
            "SELECT m.id, v.vector FROM message_vectors v"
            " JOIN messages m ON m.segment_id = v.session_id AND m.seq = v.seq"
            f"{where} AND v.embedder = ? AND length(v.vector) = ? ORDER BY m.id",
            (*params, embedder, 4 * dimensions),
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ChunkVectors(ids, vectors_from([r[1] for r in rows], dimensions))

    async def rows(self, scope: RecallScope, row_ids: Sequence[int]) -> list[RecallRow]:
        if not row_ids:
            return []
        where, params = _where(scope)
        rows = self._conn.execute(
            "SELECT m.id, s.key, m.segment_id, m.seq, m.role, m.content, m.created_at"
            f" FROM messages m{where} AND m.id IN ({','.join('?' for _ in row_ids)})",
            (*params, *row_ids),
        ).fetchall()
        return [
            RecallRow(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], from_micros(r[6])) for r in rows
        ]

    async def unembedded(self, owner: str, embedder: str, limit: int) -> list[Unembedded]:
        where, params = _where(RecallScope(owner, None))
        rows = self._conn.execute(
            "SELECT m.segment_id, m.seq, m.content FROM messages m"
            " LEFT JOIN message_vectors v"
            " ON v.session_id = m.segment_id AND v.seq = m.seq AND v.embedder = ?"
            f"{where} AND v.seq IS NULL ORDER BY m.id LIMIT ?",
            (embedder, *params, limit),
        ).fetchall()
        return [Unembedded(r[0], int(r[1]), r[2]) for r in rows]

    async def put_vectors(
        self, messages: Sequence[Unembedded], embedder: str, vectors: Vectors
    ) -> None:
        if len(messages) != len(vectors):
            raise ValueError("one vector per message")
        with self._store.transaction() as db:
            db.executemany(
                "INSERT INTO message_vectors (session_id, seq, embedder, vector)"
                " SELECT ?1, ?2, ?3, ?4 WHERE EXISTS"
                " (SELECT 1 FROM segments WHERE session_id = ?1)"
                " ON CONFLICT (session_id, seq)"
                " DO UPDATE SET embedder = excluded.embedder, vector = excluded.vector",
                [
                    (m.session_id, m.seq, embedder, vector_bytes(v))
                    for m, v in zip(messages, vectors, strict=True)
                ],
            )
