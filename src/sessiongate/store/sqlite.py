"""SQLite adapter for the store port: one file, WAL, triggers guard the invariants."""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from sessiongate.core.segments import (
    KeySummary,
    Message,
    MessageStatus,
    RecallFragment,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SegmentStatus,
    SessionKeyRecord,
)
from sessiongate.errors import (
    Conflict,
    ImmutableSegment,
    InvalidInput,
    KeyExists,
    SegmentNotFound,
    SessionNotFound,
)
from sessiongate.store.exchange import ChainRecords
from sessiongate.store.migrations import apply_sqlite_migrations

Synchronous = Literal["off", "normal", "full", "extra"]
_FTS_TOKEN_RE = re.compile(r"[^\W_]+", re.UNICODE)
_SEGMENT_COLUMNS = (
    "s.session_id, s.key, s.created_at, s.archived_at, s.parent_ids, s.continues,"
    " s.cleared_after_seq, s.context_started_at, s.message_count, s.last_activity_at,"
    " s.created_reason, (k.latest_session_id IS NOT NULL) AS is_latest"
)
_SEGMENT_FROM = (
    "FROM segments s LEFT JOIN session_keys k ON k.latest_session_id = s.session_id"
)
_MESSAGE_COLUMNS = "segment_id, seq, role, content, status, metadata, created_at"


def to_micros(instant: datetime) -> int:
    if instant.tzinfo is None:
        raise ValueError("naive datetime reached the store")
    delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    return datetime.fromtimestamp(value // 1_000_000, UTC).replace(microsecond=value % 1_000_000)


def _opt_micros(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class SQLiteStore:
    """A `Store` over one SQLite file. Use `SQLiteStore.open(path)`."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self._conn = conn
        self.path = path

    @classmethod
    def open(cls, path: str | Path, *, synchronous: Synchronous = "normal") -> SQLiteStore:
        """Open (creating if needed) and migrate. `synchronous="normal"` in WAL mode loses
        nothing when the process dies; `"full"` also survives power loss, at an fsync per
        commit."""
        target = str(path)
        if target != ":memory:":
            Path(target).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        if target != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        conn.execute("PRAGMA foreign_keys = ON")
        apply_sqlite_migrations(conn)
        return cls(conn, target)

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for maintenance and tests."""
        return self._conn

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            # Deferred foreign keys are checked here, so COMMIT is inside the guard.
            self._conn.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            self._rollback()
            raise _translate(exc) from exc
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    # -- reads ------------------------------------------------------------------

    async def get_key(self, key: str) -> SessionKeyRecord | None:
        row = self._conn.execute(
            "SELECT key, owner, latest_session_id, created_at, overrides,"
            " last_semantic_rotation_at FROM session_keys WHERE key = ?",
            (key,),
        ).fetchone()
        return None if row is None else _key_record(row)

    async def get_segment(self, session_id: str) -> Segment | None:
        row = self._conn.execute(
            f"SELECT {_SEGMENT_COLUMNS} {_SEGMENT_FROM} WHERE s.session_id = ?", (session_id,)
        ).fetchone()
        return None if row is None else _segment(row)

    async def latest_segment(self, key: str) -> Segment:
        row = self._conn.execute(
            f"SELECT {_SEGMENT_COLUMNS} FROM session_keys k"
            " JOIN segments s ON s.session_id = k.latest_session_id WHERE k.key = ?",
            (key,),
        ).fetchone()
        if row is None:
            raise SessionNotFound(f"no session with key {key!r}")
        return _segment(row)

    async def chain(self, key: str) -> list[Segment]:
        rows = self._conn.execute(
            f"SELECT {_SEGMENT_COLUMNS} {_SEGMENT_FROM} WHERE s.key = ?"
            " ORDER BY s.created_at, s.session_id",
            (key,),
        ).fetchall()
        return [_segment(r) for r in rows]

    async def thread_tail(self, segment: Segment, limit: int) -> list[Message]:
        collected: list[Message] = []
        self._collect_tail(segment, limit, collected, depth=0)
        collected.reverse()
        return collected

    def _collect_tail(
        self, segment: Segment, limit: int, out: list[Message], depth: int
    ) -> None:
        """Newest-first collection along the continuation links (which only point back)."""
        if limit <= 0 or depth > 64:
            return
        rows = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE segment_id = ? AND seq > ?"
            " ORDER BY seq DESC LIMIT ?",
            (segment.session_id, segment.cleared_after_seq, limit),
        ).fetchall()
        out.extend(_message(r) for r in rows)
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
            f"SELECT {_SEGMENT_COLUMNS} {_SEGMENT_FROM} WHERE s.session_id = ?", (session_id,)
        ).fetchone()
        if row is None:
            raise SegmentNotFound(f"no segment {session_id}")
        return _segment(row)

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Message]:
        rows = self._conn.execute(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE segment_id = ? AND seq > ?"
            " ORDER BY seq LIMIT ?",
            (session_id, after_seq, limit),
        ).fetchall()
        return [_message(r) for r in rows]

    async def rotations(self, key: str) -> list[RotationRecord]:
        rows = self._conn.execute(
            "SELECT key, from_session_id, to_session_id, reason, at, confidence,"
            " deciding_model, in_place FROM rotations WHERE key = ? ORDER BY id",
            (key,),
        ).fetchall()
        return [_rotation(r) for r in rows]

    async def recall(
        self,
        key: str,
        query: str,
        *,
        rationale: str,
        limit: int = 5,
        exclude_session_ids: Iterable[str] = (),
    ) -> list[RecallFragment]:
        words = _FTS_TOKEN_RE.findall(query)
        if not words:
            raise InvalidInput("recall query has no searchable words", code="invalid_recall")
        match = " OR ".join('"' + w.replace('"', '""') + '"' for w in words[:32])
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
            f" ORDER BY rank, m.id LIMIT ?",
            (match, key, *excluded, limit),
        ).fetchall()
        return [
            RecallFragment(
                session_id=r[0],
                message_id=f"{r[0]}:{r[1]}",
                seq=r[1],
                role=Role(r[2]),
                content=r[3],
                score=round(-float(r[5]), 6),
                rationale=rationale,
                created_at=from_micros(r[4]),
            )
            for r in rows
        ]

    async def list_keys(self, owner: str | None = None) -> list[KeySummary]:
        sql = (
            "SELECT k.key, k.owner, k.latest_session_id, COUNT(s.session_id),"
            " COALESCE(SUM(s.message_count), 0), MAX(s.last_activity_at)"
            " FROM session_keys k JOIN segments s ON s.key = k.key"
        )
        params: tuple[Any, ...] = ()
        if owner is not None:
            sql += " WHERE k.owner = ?"
            params = (owner,)
        sql += " GROUP BY k.key ORDER BY MAX(s.last_activity_at) DESC, k.key"
        return [
            KeySummary(r[0], r[1], r[2], r[3], r[4], from_micros(r[5]))
            for r in self._conn.execute(sql, params)
        ]

    # -- writes -----------------------------------------------------------------

    async def create_key(
        self, key: str, owner: str, session_id: str, now: datetime
    ) -> tuple[SessionKeyRecord, Segment]:
        at = to_micros(now)
        with self._tx() as db:
            if db.execute("SELECT 1 FROM session_keys WHERE key = ?", (key,)).fetchone():
                raise KeyExists(f"session key {key!r} already exists")
            _insert_segment(db, session_id, key, at, (), (), None)
            db.execute(
                "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
                " VALUES (?, ?, ?, ?)",
                (key, owner, session_id, at),
            )
        record = await self.get_key(key)
        segment = await self.get_segment(session_id)
        assert record is not None and segment is not None
        return record, segment

    async def rotate(
        self,
        key: str,
        *,
        expected_latest: str,
        new_session_id: str,
        reason: RotationReason,
        now: datetime,
        confidence: float | None = None,
        deciding_model: str | None = None,
        continues: Sequence[str] = (),
        extra_parents: Sequence[str] = (),
    ) -> tuple[Segment, RotationRecord]:
        at = to_micros(now)
        with self._tx() as db:
            _check_latest(db, key, expected_latest)
            parents = (expected_latest, *extra_parents)
            db.execute(
                "UPDATE segments SET archived_at = ? WHERE session_id = ?",
                (at, expected_latest),
            )
            _insert_segment(db, new_session_id, key, at, parents, tuple(continues), reason)
            db.execute(
                "UPDATE session_keys SET latest_session_id = ? WHERE key = ?",
                (new_session_id, key),
            )
            if reason is RotationReason.SEMANTIC:
                db.execute(
                    "UPDATE session_keys SET last_semantic_rotation_at = ? WHERE key = ?",
                    (at, key),
                )
            record = RotationRecord(
                key, expected_latest, new_session_id, reason, from_micros(at),
                confidence, deciding_model, in_place=False,
            )
            _insert_rotation(db, record)
        return self._segment_sync(new_session_id), record

    async def clear_in_place(
        self, key: str, *, expected_latest: str, reason: RotationReason, now: datetime
    ) -> tuple[Segment, RotationRecord]:
        at = to_micros(now)
        with self._tx() as db:
            _check_latest(db, key, expected_latest)
            db.execute(
                "UPDATE segments SET cleared_after_seq = message_count, context_started_at = ?"
                " WHERE session_id = ?",
                (at, expected_latest),
            )
            record = RotationRecord(
                key, expected_latest, expected_latest, reason, from_micros(at), in_place=True
            )
            _insert_rotation(db, record)
        return self._segment_sync(expected_latest), record

    async def append_message(
        self,
        session_id: str,
        *,
        role: Role,
        content: str,
        now: datetime,
        status: MessageStatus = MessageStatus.COMPLETE,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        at = to_micros(now)
        meta = _dumps(metadata or {})
        with self._tx() as db:
            row = db.execute(
                "SELECT message_count FROM segments WHERE session_id = ?", (session_id,)
            ).fetchone()
            if row is None:
                raise SegmentNotFound(f"no segment {session_id}")
            seq = row[0] + 1
            db.execute(
                "INSERT INTO messages (segment_id, seq, role, content, status, metadata,"
                " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (session_id, seq, role.value, content, status.value, meta, at),
            )
            db.execute(
                "UPDATE segments SET message_count = ?, last_activity_at = MAX(last_activity_at, ?)"
                " WHERE session_id = ?",
                (seq, at, session_id),
            )
        return Message(session_id, seq, role, content, status, from_micros(at), metadata or {})

    async def set_overrides(self, key: str, overrides: dict[str, Any]) -> SessionKeyRecord:
        with self._tx() as db:
            cursor = db.execute(
                "UPDATE session_keys SET overrides = ? WHERE key = ?", (_dumps(overrides), key)
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(f"no session with key {key!r}")
        record = await self.get_key(key)
        assert record is not None
        return record

    async def delete_key(self, key: str) -> None:
        with self._tx() as db:
            if not db.execute("SELECT 1 FROM session_keys WHERE key = ?", (key,)).fetchone():
                raise SessionNotFound(f"no session with key {key!r}")
            db.execute("INSERT INTO erasures (key) VALUES (?)", (key,))
            db.execute(
                "DELETE FROM messages WHERE segment_id IN"
                " (SELECT session_id FROM segments WHERE key = ?)",
                (key,),
            )
            db.execute("DELETE FROM rotations WHERE key = ?", (key,))
            db.execute("DELETE FROM session_keys WHERE key = ?", (key,))
            db.execute("DELETE FROM segments WHERE key = ?", (key,))
            db.execute("DELETE FROM erasures WHERE key = ?", (key,))

    async def export_chain(self, key: str) -> ChainRecords:
        # One read transaction so the export is a consistent snapshot.
        self._conn.execute("BEGIN")
        try:
            record = await self.get_key(key)
            if record is None:
                raise SessionNotFound(f"no session with key {key!r}")
            segments = await self.chain(key)
            messages = [
                _message(r)
                for r in self._conn.execute(
                    f"SELECT {_MESSAGE_COLUMNS} FROM messages m"
                    " JOIN segments s ON s.session_id = m.segment_id"
                    " WHERE s.key = ? ORDER BY s.created_at, s.session_id, m.seq",
                    (key,),
                )
            ]
            rotations = await self.rotations(key)
        finally:
            self._conn.execute("COMMIT")
        return ChainRecords(record, segments, messages, rotations)

    async def import_chain(self, records: ChainRecords) -> None:
        """Replays the chain as the rotations that made it, so every trigger still holds."""
        k = records.key
        by_segment: dict[str, list[Message]] = {}
        for m in records.messages:
            by_segment.setdefault(m.session_id, []).append(m)
        with self._tx() as db:
            if db.execute("SELECT 1 FROM session_keys WHERE key = ?", (k.key,)).fetchone():
                raise KeyExists(f"session key {k.key!r} already exists")
            clash = db.execute(
                f"SELECT session_id FROM segments WHERE session_id IN"
                f" ({','.join('?' for _ in records.segments)})",
                [s.session_id for s in records.segments],
            ).fetchone()
            if clash:
                raise Conflict(f"segment {clash[0]} already exists under another key")
            previous: Segment | None = None
            for seg in records.segments:
                _insert_segment(
                    db, seg.session_id, k.key, to_micros(seg.created_at), seg.parent_ids,
                    seg.continues, seg.created_reason,
                )
                if previous is None:
                    db.execute(
                        "INSERT INTO session_keys (key, owner, latest_session_id, created_at,"
                        " overrides, last_semantic_rotation_at) VALUES (?, ?, ?, ?, ?, ?)",
                        (
                            k.key, k.owner, seg.session_id, to_micros(k.created_at),
                            _dumps(k.overrides),
                            None if k.last_semantic_rotation_at is None
                            else to_micros(k.last_semantic_rotation_at),
                        ),
                    )
                else:
                    assert previous.archived_at is not None
                    db.execute(
                        "UPDATE segments SET archived_at = ? WHERE session_id = ?",
                        (to_micros(previous.archived_at), previous.session_id),
                    )
                    db.execute(
                        "UPDATE session_keys SET latest_session_id = ? WHERE key = ?",
                        (seg.session_id, k.key),
                    )
                db.executemany(
                    "INSERT INTO messages (segment_id, seq, role, content, status, metadata,"
                    " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    [
                        (m.session_id, m.seq, m.role.value, m.content, m.status.value,
                         _dumps(m.metadata), to_micros(m.created_at))
                        for m in by_segment.get(seg.session_id, [])
                    ],
                )
                db.execute(
                    "UPDATE segments SET message_count = ?, cleared_after_seq = ?,"
                    " context_started_at = ?, last_activity_at = ? WHERE session_id = ?",
                    (
                        seg.message_count, seg.cleared_after_seq,
                        to_micros(seg.context_started_at), to_micros(seg.last_activity_at),
                        seg.session_id,
                    ),
                )
                previous = seg
            for rotation in records.rotations:
                _insert_rotation(db, rotation)

    async def integrity_check(self) -> str:
        row = self._conn.execute("PRAGMA integrity_check").fetchone()
        return str(row[0])

    async def close(self) -> None:
        self._conn.close()


def _translate(exc: sqlite3.IntegrityError) -> Exception:
    text = str(exc)
    for prefix in ("segment_immutable", "latest_pointer", "rotation_log"):
        if text.startswith(prefix):
            return ImmutableSegment(text.split(": ", 1)[-1])
    return Conflict(f"the store refused the write: {text}")


def _check_latest(db: sqlite3.Connection, key: str, expected: str) -> None:
    row = db.execute(
        "SELECT latest_session_id FROM session_keys WHERE key = ?", (key,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(f"no session with key {key!r}")
    if row[0] != expected:
        raise Conflict(
            f"latest segment of {key!r} is {row[0]}, not {expected}", code="latest_moved"
        )


def _insert_segment(
    db: sqlite3.Connection,
    session_id: str,
    key: str,
    at: int,
    parents: Sequence[str],
    continues: Sequence[str],
    reason: RotationReason | None,
) -> None:
    db.execute(
        "INSERT INTO segments (session_id, key, created_at, parent_ids, continues,"
        " context_started_at, last_activity_at, created_reason)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            session_id, key, at, _dumps(list(parents)), _dumps(list(continues)), at, at,
            reason.value if reason else None,
        ),
    )


def _insert_rotation(db: sqlite3.Connection, r: RotationRecord) -> None:
    db.execute(
        "INSERT INTO rotations (key, from_session_id, to_session_id, reason, at, confidence,"
        " deciding_model, in_place) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            r.key, r.from_session_id, r.to_session_id, r.reason.value, to_micros(r.at),
            r.confidence, r.deciding_model, int(r.in_place),
        ),
    )


def _key_record(row: sqlite3.Row | tuple[Any, ...]) -> SessionKeyRecord:
    return SessionKeyRecord(
        key=row[0],
        owner=row[1],
        latest_session_id=row[2],
        created_at=from_micros(row[3]),
        overrides=json.loads(row[4]),
        last_semantic_rotation_at=_opt_micros(row[5]),
    )


def _segment(row: sqlite3.Row | tuple[Any, ...]) -> Segment:
    return Segment(
        session_id=row[0],
        key=row[1],
        status=SegmentStatus.LATEST if row[11] else SegmentStatus.ARCHIVED,
        created_at=from_micros(row[2]),
        archived_at=_opt_micros(row[3]),
        parent_ids=tuple(json.loads(row[4])),
        continues=tuple(json.loads(row[5])),
        cleared_after_seq=row[6],
        context_started_at=from_micros(row[7]),
        message_count=row[8],
        last_activity_at=from_micros(row[9]),
        created_reason=RotationReason(row[10]) if row[10] else None,
    )


def _message(row: sqlite3.Row | tuple[Any, ...]) -> Message:
    return Message(
        session_id=row[0],
        seq=row[1],
        role=Role(row[2]),
        content=row[3],
        status=MessageStatus(row[4]),
        created_at=from_micros(row[6]),
        metadata=json.loads(row[5]),
    )


def _rotation(row: sqlite3.Row | tuple[Any, ...]) -> RotationRecord:
    return RotationRecord(
        key=row[0],
        from_session_id=row[1],
        to_session_id=row[2],
        reason=RotationReason(row[3]),
        at=from_micros(row[4]),
        confidence=row[5],
        deciding_model=row[6],
        in_place=bool(row[7]),
    )
