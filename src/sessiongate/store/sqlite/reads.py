"""The SQLite store's reads (the read half of the `Store` port, store/base.py): a key's
record, its segments and rotation log, a segment's thread along its continuation links,
message pages, full-text recall over archived segments, and key listings. Each is one
query on the store's connection, answered inline (store/base.py says why).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import (
    KeySummary,
    Message,
    RecallFragment,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.errors import SegmentNotFound, SessionNotFound
from sessiongate.store.key_listing import after_storage_id, key_summary, list_keys_sql
from sessiongate.store.recall import recall_fragment, recall_words
from sessiongate.store.sqlite.rows import (
    MESSAGE_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_FROM,
    from_micros,
    key_record,
    message_from_row,
    rotation_from_row,
    segment_from_row,
)


class SQLiteReads:
    """What `SQLiteStore` (store/sqlite/store.py) reads; it owns the connection."""

    _conn: sqlite3.Connection

    async def get_key(self, key: KeyRef) -> SessionKeyRecord | None:
        row = self._conn.execute(
            "SELECT key, owner, latest_session_id, created_at, overrides,"
            " last_semantic_rotation_at, title FROM session_keys WHERE key = ?",
            (key.storage_id,),
        ).fetchone()
        return None if row is None else key_record(row)

    async def get_segment(self, session_id: str) -> Segment | None:
        row = self._conn.execute(
            f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.session_id = ?", (session_id,)
        ).fetchone()
        return None if row is None else segment_from_row(row)

    async def latest_segment(self, key: KeyRef) -> Segment:
        row = self._conn.execute(
            f"SELECT {SEGMENT_COLUMNS} FROM session_keys k"
            " JOIN segments s ON s.session_id = k.latest_session_id WHERE k.key = ?",
            (key.storage_id,),
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with key {key!r}")
        return segment_from_row(row)

    async def chain(self, key: KeyRef) -> list[Segment]:
        rows = self._conn.execute(
            f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.key = ? ORDER BY s.rowid",
            (key.storage_id,),
        ).fetchall()
        return [segment_from_row(r) for r in rows]

    async def thread_tail(self, segment: Segment, limit: int) -> list[Message]:
        collected: list[Message] = []
        self._collect_tail(segment, limit, collected, depth=0)
        collected.reverse()
        return collected

    def _collect_tail(self, segment: Segment, limit: int, out: list[Message], depth: int) -> None:
        """Newest-first collection along the continuation links (which only point back)."""
        if limit <= 0 or depth > 64:
            return
        rows = self._conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment_id = ? AND seq > ?"
            " ORDER BY seq DESC LIMIT ?",
            (segment.session_id, segment.cleared_after_seq, limit),
        ).fetchall()
        out.extend(message_from_row(r) for r in rows)
        remaining = limit - len(rows)
        for parent_id in reversed(segment.continues):
            if remaining <= 0:
                break
            parent = self._segment_sync(parent_id)
            before = len(out)
            self._collect_tail(parent, remaining, out, depth + 1)
            remaining -= len(out) - before

    def _segment_sync(self, session_id: str) -> Segment:
        row = self._conn.execute(
            f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SegmentNotFound(f"no segment {session_id}")
        return segment_from_row(row)

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Message]:
        rows = self._conn.execute(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (session_id, after_seq, limit),
        ).fetchall()
        return [message_from_row(r) for r in rows]

    async def rotations(self, key: KeyRef) -> list[RotationRecord]:
        rows = self._conn.execute(
            "SELECT key, from_session_id, to_session_id, reason, at, confidence,"
            " deciding_model, in_place FROM rotations WHERE key = ? ORDER BY id",
            (key.storage_id,),
        ).fetchall()
        return [rotation_from_row(r) for r in rows]

    async def recall(
        self,
        key: KeyRef,
        query: str,
        *,
        rationale: str,
        limit: int = 5,
        exclude_session_ids: Iterable[str] = (),
    ) -> list[RecallFragment]:
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in recall_words(query))
        excluded = tuple(exclude_session_ids)
        placeholders = ",".join("?" for _ in excluded) or "''"
        rows = self._conn.execute(
            f"SELECT m.segment_id, m.seq, m.role, m.content, m.created_at,"
            f" bm25(messages_fts) AS rank"
            f" FROM messages_fts JOIN messages m ON m.id = messages_fts.rowid"
            f" JOIN segments s ON s.session_id = m.segment_id"
            f" JOIN session_keys k ON k.key = s.key"
            f" WHERE messages_fts MATCH ? AND s.key = ?"
            f" AND s.session_id != k.latest_session_id"
            f" AND s.session_id NOT IN ({placeholders})"
            # The offline stand-in's answers are never recalled (core/context.py).
            f" AND json_extract(m.metadata, '$.offline') IS NOT 1"
            # Nor what the safety gate refused (service/turn/safety_gate.py).
            f" AND json_extract(m.metadata, '$.classification.label') IS NOT 'unsafe'"
            f" ORDER BY rank, m.id LIMIT ?",
            (match, key.storage_id, *excluded, limit),
        ).fetchall()
        return [
            recall_fragment(
                r[0], r[1], r[2], r[3], from_micros(r[4]), score=-float(r[5]), rationale=rationale
            )
            for r in rows
        ]

    async def list_keys(
        self, owner: str | None = None, *, after: KeyRef | None = None, limit: int | None = None
    ) -> list[KeySummary]:
        sql = list_keys_sql(lambda n: f"?{n}", by_owner=owner is not None)
        params: tuple[object, ...] = (after_storage_id(after), -1 if limit is None else limit)
        rows = self._conn.execute(sql, params if owner is None else (*params, owner))
        return [key_summary(r, from_micros(r[5])) for r in rows]

    async def count_keys(self) -> int:
        return int(self._conn.execute("SELECT COUNT(*) FROM session_keys").fetchone()[0])
