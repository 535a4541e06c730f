"""The recall index in the SQLite database (store/recall.py's port): FTS5 (bm25) over the
archived messages (`recall_fts`, filled when a segment is archived, each row with its
owner's token, so a search over every key of one user never scores another user's
matches) and the message vectors as float32 BLOBs (`message_vectors`; both migration
0024). A live segment's messages enter `recall_fts` lazily, when a recall over its
owner's keys catches up (`recall_live` says how far; migration 0025). Shares the session
store's connection and transactions.
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

#: A message the recall may read: the owner's, not the offline stand-in's, not UNSAFE
#: (`_where` adds which segments).
_RECALLABLE = (
    " JOIN segments s ON s.session_id = m.segment_id"
    " JOIN session_keys k ON k.key = s.key"
    " WHERE k.owner = ?"
    " AND json_extract(m.metadata, '$.offline') IS NOT 1"
    " AND json_extract(m.metadata, '$.classification.label') IS NOT 'unsafe'"
)

#: The owner's live segments' messages not in recall_fts yet (`catch_up`).
_BEHIND = (
    " FROM session_keys k JOIN segments s ON s.session_id = k.latest_session_id"
    " LEFT JOIN recall_live r ON r.session_id = s.session_id"
    " JOIN messages m ON m.segment_id = s.session_id AND m.seq > coalesce(r.through_seq, 0)"
    " WHERE k.owner = ? AND s.archived_at IS NULL"
)


def _where(scope: RecallScope) -> tuple[str, tuple[object, ...]]:
    """The recallable-message condition of `scope` and its parameters, in order."""
    sql = _RECALLABLE
    params: list[object] = [scope.owner]
    if not scope.live:
        sql += " AND s.session_id != k.latest_session_id"
    elif scope.asker is not None:
        sql += " AND (s.session_id != k.latest_session_id OR s.key != ?)"
        params.append(scope.asker)
    if scope.key is not None:
        sql += " AND s.key = ?"
        params.append(scope.key)
    if scope.exclude:
        sql += f" AND s.session_id NOT IN ({','.join('?' for _ in scope.exclude)})"
        params.extend(scope.exclude)
    return sql, tuple(params)


#: A word in more than one message in this many is left out of a recall's keyword query
#: (unless every word of the query is); see `SQLiteRecallIndex._telling`.
COMMON_SHARE = 10
#: Below this many messages every match is scored in well under a millisecond: no word
#: is left out.
PRUNE_FROM_MESSAGES = 2000
#: Words whose message counts are remembered (until the messages grow by a tenth).
CACHED_WORD_COUNTS = 10_000


def owner_token(owner: str) -> str:
    """The owner as recall_fts indexes it: SQLite's `'o' || hex(owner)`, one token."""
    return "o" + owner.encode("utf-8").hex().upper()


class WordCounts:
    """How many archived messages hold each word, all users together: remembered until
    the messages grow by a tenth (the counts only decide which words are common)."""

    def __init__(self) -> None:
        self.basis = 0
        self.counts: dict[str, int] = {}

    def get(self, db: sqlite3.Connection, word: str, total: int) -> int:
        if total * 10 > self.basis * 11 or len(self.counts) >= CACHED_WORD_COUNTS:
            self.basis, self.counts = total, {}
        found = self.counts.get(word)
        if found is None:
            (found,) = db.execute(
                "SELECT count(*) FROM recall_fts WHERE recall_fts MATCH ?",
                (f"content : {fts_match([word])}",),
            ).fetchone()
            self.counts[word] = found = int(found)
        return found


class SQLiteRecallIndex:
    def __init__(self, store: SQLiteStore) -> None:
        self._store = store
        self._conn: sqlite3.Connection = store.connection
        self._counts = WordCounts()

    async def catch_up(self, owner: str) -> int:
        behind = self._conn.execute(f"SELECT count(*){_BEHIND}", (owner,)).fetchone()[0]
        if not behind:
            return 0
        with self._store.transaction() as db:
            added = db.execute(
                "INSERT INTO recall_fts (rowid, owner, content)"
                f" SELECT m.id, 'o' || hex(k.owner), m.content{_BEHIND}",
                (owner,),
            ).rowcount
            db.execute(
                "INSERT INTO recall_live (session_id, through_seq)"
                " SELECT s.session_id, max(m.seq)"
                f"{_BEHIND} GROUP BY s.session_id"
                " ON CONFLICT (session_id) DO UPDATE SET through_seq = excluded.through_seq",
                (owner,),
            )
        return int(added) if added >= 0 else int(behind)

    async def keyword(self, scope: RecallScope, words: Sequence[str], depth: int) -> list[int]:
        if not words:
            return []
        where, params = _where(scope)
        words = self._telling(words)
        # The owner's token narrows the match inside FTS5 (migration 0024); the owner's
        # column weighs nothing in the rank.
        match = f'owner : "{owner_token(scope.owner)}" AND ({fts_match(words)})'
        rows = self._conn.execute(
            # CROSS JOIN: FTS5 first, then each match's message (never the other way).
            "SELECT m.id FROM recall_fts f CROSS JOIN messages m ON m.id = f.rowid"
            f"{where} AND recall_fts MATCH ? ORDER BY bm25(recall_fts, 0.0, 1.0), m.id LIMIT ?",
            (*params, match, depth),
        ).fetchall()
        return [int(r[0]) for r in rows]

    def _telling(self, words: Sequence[str]) -> list[str]:
        """`words` without those in more than one message in COMMON_SHARE of the whole
        index, unless every word is one. FTS5's bm25() reads every match of each word
        (every user's) to learn how rare it is: a word in a tenth of 100,000 messages
        costs milliseconds, and weighs little in the rank for being so common."""
        (newest,) = self._conn.execute("SELECT coalesce(max(id), 0) FROM messages").fetchone()
        total = int(newest)  # ids only grow: about how many messages were ever kept
        if total < PRUNE_FROM_MESSAGES or len(words) < 2:
            return list(words)
        telling = [
            w for w in words if self._counts.get(self._conn, w, total) * COMMON_SHARE <= total
        ]
        return telling or list(words)

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
        where, params = _where(RecallScope(owner, None, live=True))
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
