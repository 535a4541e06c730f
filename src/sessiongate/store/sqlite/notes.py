"""Notes in the SQLite database: FTS5 (bm25) over the chunks, vectors as float32 BLOBs.

Writes share the session store's connection and transactions. Keyword searches run on a
reader connection of their own, on one worker thread: an FTS5 query that scores a few
thousand matching chunks takes milliseconds (tens at the tail), too long to hold the event
loop that streams every other conversation, and off the loop it overlaps the semantic
ranking of the same search. WAL lets that reader see every committed write.

Two rules keep a keyword query's work down without changing its answer:
- A word found in more than half of all chunks is left out (unless every word of the query
  is that common). FTS5's bm25 clamps such a word's IDF to 1e-6, so it adds nothing to any
  score; yet matching it made FTS5 score thousands of rows, most of a search's time.
- When every chunk belongs to the owner (one user, as in a personal gateway), the owner
  filter and its join are left out, so FTS5 sorts by its own `rank` and stops at the limit.
  The chunk rows a search returns are still read with the owner in the WHERE clause.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

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
from sessiongate.store.sqlite.rows import from_micros, to_micros
from sessiongate.store.sqlite.store import SQLiteStore

# bm25 weights per FTS column (title, content): a word in the title counts double, as the
# table's configured `rank` (0007_notes.sql) does.
_BM25 = "bm25(note_chunks_fts, 2.0, 1.0)"
#: Below this many chunks in all, FTS5 scores every match in well under a millisecond: no
#: word is left out.
PRUNE_FROM_CHUNKS = 1000
#: Words whose chunk counts are remembered (while no chunk is written or removed).
CACHED_WORD_COUNTS = 10_000


def fts_match(words: Sequence[str]) -> str:
    """An FTS5 query matching any of `words`. Each word is a quoted string (its quotes
    doubled), which FTS5 reads as a phrase and never as an operator, a prefix `*`, a
    column filter or a parenthesis, so no user text can make the query invalid."""
    return " OR ".join('"' + word.replace('"', '""') + '"' for word in words)


class SQLiteNoteStore:
    """Shares the session store's connection and transactions."""

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection
        # An in-memory database has no second connection to read it: search inline.
        self._threaded = store.path != ":memory:"
        self._worker: ThreadPoolExecutor | None = None
        self._reader: sqlite3.Connection | None = None  # used by the worker thread only
        self._word_counts = WordCounts()  # likewise

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
        replaced = 0
        # BEGIN IMMEDIATE: the count below and the insert see no other writer between them.
        with self._store.transaction() as db:
            if replace_source and note.source is not None:
                old = [
                    row[0]
                    for row in db.execute(
                        "SELECT id FROM notes WHERE owner = ? AND source = ?",
                        (note.owner, note.source),
                    )
                ]
                for note_id in old:
                    _delete(db, note_id)
                replaced = len(old)
            if max_notes is not None:
                (kept,) = db.execute(
                    "SELECT count(*) FROM notes WHERE owner = ?", (note.owner,)
                ).fetchone()
                if kept >= max_notes:
                    raise NoteLimitReached(max_notes)  # rolls back a replacement too
            db.execute(
                f"INSERT INTO notes ({NOTE_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?)",
                (
                    note.note_id,
                    note.owner,
                    note.title,
                    note.source,
                    note.content,
                    to_micros(note.created_at),
                ),
            )
            db.executemany(
                "INSERT INTO note_chunks"
                " (note_id, owner, seq, title, content, embedder, embedding)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
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
        return replaced

    async def list_notes(self, owner: str, limit: int, before: str | None) -> list[Note]:
        if before is None:
            rows = self._conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE owner = ? ORDER BY id DESC LIMIT ?",
                (owner, limit),
            ).fetchall()
        else:
            rows = self._conn.execute(
                f"SELECT {NOTE_COLUMNS} FROM notes WHERE owner = ? AND id < ?"
                " ORDER BY id DESC LIMIT ?",
                (owner, before, limit),
            ).fetchall()
        return [_note(r) for r in rows]

    async def delete_note(self, owner: str, note_id: str) -> bool:
        with self._store.transaction() as db:
            found = db.execute(
                "SELECT 1 FROM notes WHERE id = ? AND owner = ?", (note_id, owner)
            ).fetchone()
            if found is None:
                return False
            _delete(db, note_id)
        return True

    async def keyword_chunks(self, owner: str, words: Sequence[str], limit: int) -> list[int]:
        if not words:
            return []
        if not self._threaded:
            return keyword_query(self._conn, owner, words, limit, self._word_counts)
        if self._worker is None:
            self._worker = ThreadPoolExecutor(1, thread_name_prefix="sessiongate-notes-fts")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._worker, self._search, owner, list(words), limit)

    def _search(self, owner: str, words: list[str], limit: int) -> list[int]:
        if self._reader is None:
            self._reader = sqlite3.connect(self._store.path, isolation_level=None)
            self._reader.execute("PRAGMA busy_timeout = 10000")
            self._reader.execute("PRAGMA query_only = ON")
        return keyword_query(self._reader, owner, words, limit, self._word_counts)

    async def aclose(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            await asyncio.get_running_loop().run_in_executor(worker, self._close_reader)
            worker.shutdown(wait=False)

    def _close_reader(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            reader.close()

    async def notes_version(self, owner: str) -> int:
        row = self._conn.execute(
            "SELECT version FROM notes_versions WHERE owner = ?", (owner,)
        ).fetchone()
        return 0 if row is None else int(row[0])

    async def chunk_vectors(self, owner: str, embedder: str, dimensions: int) -> ChunkVectors:
        rows = self._conn.execute(
            "SELECT id, embedding FROM note_chunks WHERE owner = ? AND embedder = ?"
            " AND length(embedding) = ? ORDER BY id",
            (owner, embedder, 4 * dimensions),
        ).fetchall()
        ids = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
        return ChunkVectors(ids, vectors_from([r[1] for r in rows], dimensions))

    async def chunks(self, owner: str, chunk_ids: Sequence[int]) -> list[NoteChunk]:
        if not chunk_ids:
            return []
        placeholders = ",".join("?" for _ in chunk_ids)
        rows = self._conn.execute(
            "SELECT c.id, c.note_id, c.seq, c.title, n.source, c.content"
            " FROM note_chunks c JOIN notes n ON n.id = c.note_id"
            # `+c.owner`: find the rows by id, then check the owner (the owner's index
            # would make SQLite walk every chunk the owner has).
            f" WHERE c.id IN ({placeholders}) AND +c.owner = ?",
            (*chunk_ids, owner),
        ).fetchall()
        return [NoteChunk(int(r[0]), r[1], int(r[2]), r[3], r[4], r[5]) for r in rows]


class WordCounts:
    """How many chunks hold each word, remembered while `notes_totals.version` stands."""

    def __init__(self) -> None:
        self.version = -1
        self.counts: dict[str, int] = {}

    def get(self, db: sqlite3.Connection, word: str, version: int) -> int:
        if version != self.version or len(self.counts) >= CACHED_WORD_COUNTS:
            self.version, self.counts = version, {}
        found = self.counts.get(word)
        if found is None:
            (found,) = db.execute(
                "SELECT count(*) FROM note_chunks_fts WHERE note_chunks_fts MATCH ?",
                (fts_match([word]),),
            ).fetchone()
            self.counts[word] = found = int(found)
        return found


def keyword_query(
    db: sqlite3.Connection,
    owner: str,
    words: Sequence[str],
    limit: int,
    word_counts: WordCounts,
) -> list[int]:
    """Chunk ids of `owner` holding any of `words`, best bm25 first (see the module
    docstring for the two rules that keep the work down)."""
    row = db.execute(
        "SELECT t.version, t.chunks, coalesce(v.chunks, 0) FROM notes_totals t"
        " LEFT JOIN notes_versions v ON v.owner = ? WHERE t.id = 1",
        (owner,),
    ).fetchone()
    version, total, mine = int(row[0]), int(row[1]), int(row[2])
    if mine == 0:
        return []
    if total >= PRUNE_FROM_CHUNKS and len(words) > 1:
        # Words in more than half of all chunks weigh nothing in bm25; unless all are.
        common = [w for w in words if 2 * word_counts.get(db, w, version) > total]
        if len(common) < len(words):
            words = [w for w in words if w not in common]
    match = fts_match(words)
    if mine == total:
        rows = db.execute(
            # `ORDER BY rank` alone: FTS5 then sorts by bm25 itself, keeping only the best.
            "SELECT rowid FROM note_chunks_fts WHERE note_chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (match, limit),
        ).fetchall()
    else:
        rows = db.execute(
            "SELECT c.id FROM note_chunks_fts f JOIN note_chunks c ON c.id = f.rowid"
            f" WHERE note_chunks_fts MATCH ? AND c.owner = ? ORDER BY {_BM25}, c.id LIMIT ?",
            (match, owner, limit),
        ).fetchall()
    return [int(r[0]) for r in rows]


def _delete(db: sqlite3.Connection, note_id: str) -> None:
    # Chunks first and explicitly (not by the cascade): their delete trigger keeps the
    # FTS index in step, whatever the foreign-key settings of the connection.
    db.execute("DELETE FROM note_chunks WHERE note_id = ?", (note_id,))
    db.execute("DELETE FROM notes WHERE id = ?", (note_id,))


def _note(row: tuple[Any, ...]) -> Note:
    return note_from_row(row, from_micros)
