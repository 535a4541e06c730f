"""The recall index in the PostgreSQL database (store/recall.py's port): the tsvector of
each archived message (`message_search`, GIN, ts_rank; filled when a segment is archived,
and for a live segment lazily, when a recall over its owner's keys catches up; migration
0023) and the message vectors as float32 BYTEA (`message_vectors`, migration 0022). The
same answers as SQLiteRecallIndex, on the session store's pool.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from sessiongate.core.notes import Vectors
from sessiongate.store.notes import ChunkVectors, vector_bytes, vectors_from
from sessiongate.store.postgres.store import PostgresStore
from sessiongate.store.recall import RecallRow, RecallScope, Unembedded

#: A message the recall may read ($1 the owner, $2 the key or NULL for every key, $3 the
#: segments left out, $4 whether live segments are recallable, $5 the asking key whose
#: live segment stays out, or NULL): archived (or live, but not the asker's), not the
#: offline stand-in's, not classified UNSAFE.
_RECALLABLE = """
JOIN segments s ON s.session_id = m.segment_id
JOIN session_keys k ON k.key = s.key
WHERE k.owner = $1 AND ($2::text IS NULL OR s.key = $2)
  AND (s.session_id <> k.latest_session_id
       OR ($4::boolean AND s.key IS DISTINCT FROM $5::text))
  AND s.session_id <> ALL ($3::text[])
  AND (m.metadata ->> 'offline') IS DISTINCT FROM 'true'
  AND (m.metadata -> 'classification' ->> 'label') IS DISTINCT FROM 'unsafe'
"""

# Each word is its own plainto_tsquery (no operators: user text is never tsquery syntax),
# OR-ed, as SQLite's FTS5 query is; 'simple' as message_search's documents. The owner's
# recallable messages come first (indexed: keys by owner, segments by key, messages by
# segment), then their documents are matched: the GIN index would find every user's
# matches of a common word and filter them after.
_KEYWORD_SQL = f"""
WITH mine AS MATERIALIZED (
    SELECT m.id FROM messages m
    {_RECALLABLE}
), q AS (
    SELECT string_agg('(' || t::text || ')', ' | ')::tsquery AS query
    FROM unnest($6::text[]) AS w, plainto_tsquery('simple', w) AS t
    WHERE numnode(t) > 0
)
SELECT ms.message_id
FROM mine JOIN message_search ms ON ms.message_id = mine.id, q
WHERE ms.document @@ q.query
ORDER BY ts_rank(ms.document, q.query) DESC, ms.message_id
LIMIT $7
"""

_VECTORS_SQL = f"""
SELECT m.id, v.vector
FROM message_vectors v
JOIN messages m ON m.segment_id = v.session_id AND m.seq = v.seq
{_RECALLABLE}
  AND v.embedder = $6 AND octet_length(v.vector) = $7
ORDER BY m.id
"""

_ROWS_SQL = f"""
SELECT m.id, s.key, m.segment_id, m.seq, m.role, m.content, m.created_at
FROM messages m
{_RECALLABLE}
  AND m.id = ANY ($6::bigint[])
"""

_UNEMBEDDED_SQL = f"""
SELECT m.segment_id, m.seq, m.content
FROM messages m
LEFT JOIN message_vectors v
  ON v.session_id = m.segment_id AND v.seq = m.seq AND v.embedder = $6
{_RECALLABLE}
  AND v.seq IS NULL
ORDER BY m.id
LIMIT $7
"""

_CATCH_UP_SQL = """
INSERT INTO message_search (message_id, segment_id, document)
SELECT m.id, m.segment_id, to_tsvector('simple', m.content)
FROM session_keys k
JOIN segments s ON s.session_id = k.latest_session_id
JOIN messages m ON m.segment_id = s.session_id
WHERE k.owner = $1 AND s.archived_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM message_search ms WHERE ms.message_id = m.id)
ON CONFLICT (message_id) DO NOTHING
"""

_PUT_SQL = """
INSERT INTO message_vectors (session_id, seq, embedder, vector)
SELECT $1::text, $2::integer, $3::text, $4::bytea
WHERE EXISTS (SELECT 1 FROM segments WHERE session_id = $1::text)
ON CONFLICT (session_id, seq) DO UPDATE SET embedder = excluded.embedder,
    vector = excluded.vector
"""


def _scope(scope: RecallScope) -> tuple[str, str | None, list[str], bool, str | None]:
    return scope.owner, scope.key, list(scope.exclude), scope.live, scope.asker


class PostgresRecallIndex:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def catch_up(self, owner: str) -> int:
        done = await self._store.pool.execute(_CATCH_UP_SQL, owner)
        return int(done.rsplit(" ", 1)[-1])  # "INSERT 0 n"

    async def keyword(self, scope: RecallScope, words: Sequence[str], depth: int) -> list[int]:
        if not words:
            return []
        rows = await self._store.pool.fetch(_KEYWORD_SQL, *_scope(scope), list(words), depth)
        return [int(r[0]) for r in rows]

    async def vectors(self, scope: RecallScope, embedder: str, dimensions: int) -> ChunkVectors:
        rows = await self._store.pool.fetch(_VECTORS_SQL, *_scope(scope), embedder, 4 * dimensions)
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ChunkVectors(ids, vectors_from([r[1] for r in rows], dimensions))

    async def rows(self, scope: RecallScope, row_ids: Sequence[int]) -> list[RecallRow]:
        if not row_ids:
            return []
        rows = await self._store.pool.fetch(_ROWS_SQL, *_scope(scope), list(row_ids))
        return [RecallRow(int(r[0]), r[1], r[2], int(r[3]), r[4], r[5], r[6]) for r in rows]

    async def unembedded(self, owner: str, embedder: str, limit: int) -> list[Unembedded]:
        rows = await self._store.pool.fetch(
            _UNEMBEDDED_SQL, *_scope(RecallScope(owner, None, live=True)), embedder, limit
        )
        return [Unembedded(r[0], int(r[1]), r[2]) for r in rows]

    async def put_vectors(
        self, messages: Sequence[Unembedded], embedder: str, vectors: Vectors
    ) -> None:
        if len(messages) != len(vectors):
            raise ValueError("one vector per message")
        async with self._store.pool.acquire() as db, db.transaction():
            await db.executemany(
                _PUT_SQL,
                [
                    (m.session_id, m.seq, embedder, vector_bytes(v))
                    for m, v in zip(messages, vectors, strict=True)
                ],
            )
