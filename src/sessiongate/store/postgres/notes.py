"""Notes in the PostgreSQL database: a generated tsvector (GIN, ts_rank) over the chunks,
vectors as float32 BYTEA. The same answers as SQLiteNoteStore."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg
import numpy as np

from sessiongate.core.notes import Note, Vectors
from sessiongate.store.notes import (
    NOTE_COLUMNS,
    ChunkVectors,
    NoteChunk,
    NoteLimitReached,
    note_from_row,
    vector_bytes,
    vectors_from,
)
from sessiongate.store.postgres.rows import utc
from sessiongate.store.postgres.store import PostgresStore

# Each word becomes its own plainto_tsquery (which reads no operators: user text can
# never be tsquery syntax), and the words are OR-ed, as SQLite's FTS5 query does. A word
# that is only a stop word ("the") yields an empty query and drops out.
_KEYWORD_SQL = """
SELECT c.id
FROM (
    SELECT string_agg('(' || t::text || ')', ' | ')::tsquery AS query
    FROM unnest($2::text[]) AS w, plainto_tsquery('english', w) AS t
    WHERE numnode(t) > 0
) q
JOIN note_chunks c ON c.document @@ q.query
WHERE c.owner = $1
ORDER BY ts_rank(c.document, q.query) DESC, c.id
LIMIT $3
"""

_BUMP_SQL = (
    "INSERT INTO notes_versions (owner, version) VALUES ($1, 1)"
    " ON CONFLICT (owner) DO UPDATE SET version = notes_versions.version + 1"
)


class PostgresNoteStore:
    """Shares the session store's pool."""

    def __init__(self, store: PostgresStore) -> None:
        self._store = store

    async def add_note(
        self,
        note: Note,
        chunks: Sequence[str],
        vectors: Vectors | None,
        embedder: str | None,
        *,
        replace_source: bool = False,
        max_notes: int | None = None,
    ) -> int:
        if vectors is not None and len(vectors) != len(chunks):
            raise ValueError("one vector per chunk")
        async with self._store.transaction() as db:
            replaced = 0
            if max_notes is not None or (replace_source and note.source is not None):
                # The row lock of the version row serialises two writes of one owner, so
                # two processes importing the same file cannot both keep a copy, and two
                # adds at the cap cannot both count the notes before either is kept.
                await db.execute(_BUMP_SQL, note.owner)
            if replace_source and note.source is not None:
                gone = await db.fetch(
                    "DELETE FROM notes WHERE owner = $1 AND source = $2 RETURNING id",
                    note.owner,
                    note.source,
                )
                replaced = len(gone)
            if max_notes is not None:
                kept = await db.fetchval("SELECT count(*) FROM notes WHERE owner = $1", note.owner)
                if kept >= max_notes:
                    raise NoteLimitReached(max_notes)  # rolls back a replacement too
            await db.execute(
                f"INSERT INTO notes ({NOTE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6)",
                note.note_id,
                note.owner,
                note.title,
                note.source,
                note.content,
                utc(note.created_at),
            )
            await db.executemany(
                "INSERT INTO note_chunks"
                " (note_id, owner, seq, title, content, embedder, embedding)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                [
                    (
                        note.note_id,
                        note.owner,
                        seq,
                        note.title,
                        text,
                        embedder if vectors is not None else None,
                        vector_bytes(vectors[seq]) if vectors is not None else None,
                    )
                    for seq, text in enumerate(chunks)
                ],
            )
            await db.execute(_BUMP_SQL, note.owner)
        return replaced

    async def list_notes(self, owner: str, limit: int, before: str | None) -> list[Note]:
        if before is None:
            rows = await self._store.pool.fetch(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE owner = $1 ORDER BY id DESC LIMIT $2",
                owner,
                limit,
            )
        else:
            rows = await self._store.pool.fetch(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE owner = $1 AND id < $2"
                " ORDER BY id DESC LIMIT $3",
                owner,
                before,
                limit,
            )
        return [_note(r) for r in rows]

    async def delete_note(self, owner: str, note_id: str) -> bool:
        async with self._store.transaction() as db:
            gone = await db.fetchval(
                "DELETE FROM notes WHERE id = $1 AND owner = $2 RETURNING id", note_id, owner
            )
            if gone is None:
                return False
            # The chunks go by the foreign key's cascade, in this transaction.
            await db.execute(_BUMP_SQL, owner)
        return True

    async def keyword_chunks(self, owner: str, words: Sequence[str], limit: int) -> list[int]:
        if not words:
            return []
        rows = await self._store.pool.fetch(_KEYWORD_SQL, owner, list(words), limit)
        return [int(r[0]) for r in rows]

    async def notes_version(self, owner: str) -> int:
        value = await self._store.pool.fetchval(
            "SELECT version FROM notes_versions WHERE owner = $1", owner
        )
        return 0 if value is None else int(value)

    async def chunk_vectors(self, owner: str, embedder: str, dimensions: int) -> ChunkVectors:
        rows = await self._store.pool.fetch(
            "SELECT id, embedding FROM note_chunks WHERE owner = $1 AND embedder = $2"
            " AND octet_length(embedding) = $3 ORDER BY id",
            owner,
            embedder,
            4 * dimensions,
        )
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ChunkVectors(ids, vectors_from([r[1] for r in rows], dimensions))

    async def chunks(self, owner: str, chunk_ids: Sequence[int]) -> list[NoteChunk]:
        if not chunk_ids:
            return []
        rows = await self._store.pool.fetch(
            "SELECT c.id, c.note_id, c.seq, c.title, n.source, c.content"
            " FROM note_chunks c JOIN notes n ON n.id = c.note_id"
            " WHERE c.owner = $1 AND c.id = ANY($2::bigint[])",
            owner,
            list(chunk_ids),
        )
        return [NoteChunk(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5]) for r in rows]

    async def aclose(self) -> None:
        return None  # the pool is the session store's


def _note(row: asyncpg.Record) -> Note:
    return note_from_row(row, utc)
