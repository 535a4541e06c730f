"""SQLite adapter for the store port: one file, WAL, triggers guard the invariants.

Here: opening the file, transactions, and the writes (keys, rotations, messages,
overrides, erasure, export and import); the reads are in store/sqlite/reads.py.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import (
    Message,
    MessageStatus,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.errors import (
    KeyExists,
    SegmentNotFound,
    SessionNotFound,
)
from sessiongate.store.exchange import ChainRecords
from sessiongate.store.migrations import apply_sqlite_migrations
from sessiongate.store.private_files import prepare_private_database
from sessiongate.store.sqlite.caps import check_key_cap, check_segment_cap
from sessiongate.store.sqlite.chain_import import replay_chain
from sessiongate.store.sqlite.checkpoint import WAL_SIZE_LIMIT_BYTES, WalCheckpointer
from sessiongate.store.sqlite.reads import SQLiteReads
from sessiongate.store.sqlite.rows import (
    check_latest,
    dumps,
    from_micros,
    insert_rotation,
    insert_segment,
    message_from_row,
    to_micros,
    translate,
)

Synchronous = Literal["off", "normal", "full", "extra"]


class SQLiteStore(SQLiteReads):
    """A `Store` over one SQLite file. Use `SQLiteStore.open(path)`."""

    def __init__(
        self, conn: sqlite3.Connection, path: str, checkpointer: WalCheckpointer | None = None
    ) -> None:
        self._conn = conn
        self.path = path
        self.checkpointer = checkpointer

    @classmethod
    def open(cls, path: str | Path, *, synchronous: Synchronous = "normal") -> SQLiteStore:
        """Open (creating if needed) and migrate. `synchronous="normal"` in WAL mode loses
        nothing when the process dies; `"full"` also survives power loss, at an fsync per
        commit."""
        target = str(path)
        if target != ":memory:":
            prepare_private_database(Path(target))
        conn = sqlite3.connect(target, isolation_level=None, check_same_thread=False)
        conn.execute("PRAGMA busy_timeout = 10000")
        checkpointer = None
        if target != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            # Checkpoints run on their own thread (checkpoint.py), not in a commit.
            conn.execute("PRAGMA wal_autocheckpoint = 0")
            conn.execute(f"PRAGMA journal_size_limit = {WAL_SIZE_LIMIT_BYTES}")
            checkpointer = WalCheckpointer(target)
        conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")
        conn.execute("PRAGMA foreign_keys = ON")
        apply_sqlite_migrations(conn)
        if checkpointer is not None:
            checkpointer.start()
        return cls(conn, target, checkpointer)

    @property
    def connection(self) -> sqlite3.Connection:
        """The raw connection, for maintenance and tests."""
        return self._conn

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            # Deferred foreign keys are checked here, so COMMIT is inside the guard.
            self._conn.execute("COMMIT")
        except sqlite3.IntegrityError as exc:
            self._rollback()
            raise translate(exc) from exc
        except BaseException:
            self._rollback()
            raise

    def _rollback(self) -> None:
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    # -- writes -----------------------------------------------------------------

    async def create_key(
        self, key: KeyRef, session_id: str, now: datetime, *, max_keys: int | None = None
    ) -> tuple[SessionKeyRecord, Segment]:
        at = to_micros(now)
        stored = key.storage_id
        with self.transaction() as db:
            if db.execute("SELECT 1 FROM session_keys WHERE key = ?", (stored,)).fetchone():
                raise KeyExists(f"session key {key.name!r} already exists")
            check_key_cap(db, key.owner, max_keys)
            insert_segment(db, session_id, stored, at, (), (), None)
            db.execute(
                "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
                " VALUES (?, ?, ?, ?)",
                (stored, key.owner, session_id, at),
            )
        record = await self.get_key(key)
        segment = await self.get_segment(session_id)
        assert record is not None and segment is not None
        return record, segment

    async def rotate(
        self,
        key: KeyRef,
        *,
        expected_latest: str,
        new_session_id: str,
        reason: RotationReason,
        now: datetime,
        confidence: float | None = None,
        deciding_model: str | None = None,
        continues: Sequence[str] = (),
        extra_parents: Sequence[str] = (),
        max_segments: int | None = None,
    ) -> tuple[Segment, RotationRecord]:
        at = to_micros(now)
        stored = key.storage_id
        with self.transaction() as db:
            check_latest(db, key, expected_latest)
            check_segment_cap(db, key, max_segments)
            parents = (expected_latest, *extra_parents)
            db.execute(
                "UPDATE segments SET archived_at = ? WHERE session_id = ?",
                (at, expected_latest),
            )
            insert_segment(db, new_session_id, stored, at, parents, tuple(continues), reason)
            db.execute(
                "UPDATE session_keys SET latest_session_id = ? WHERE key = ?",
                (new_session_id, stored),
            )
            if reason is RotationReason.SEMANTIC:
                db.execute(
                    "UPDATE session_keys SET last_semantic_rotation_at = ? WHERE key = ?",
                    (at, stored),
                )
            record = RotationRecord(
                key,
                expected_latest,
                new_session_id,
                reason,
                from_micros(at),
                confidence,
                deciding_model,
                in_place=False,
            )
            insert_rotation(db, record)
        return self._segment_sync(new_session_id), record

    async def clear_in_place(
        self, key: KeyRef, *, expected_latest: str, reason: RotationReason, now: datetime
    ) -> tuple[Segment, RotationRecord]:
        at = to_micros(now)
        with self.transaction() as db:
            check_latest(db, key, expected_latest)
            db.execute(
                "UPDATE segments SET cleared_after_seq = message_count, context_started_at = ?"
                " WHERE session_id = ?",
                (at, expected_latest),
            )
            record = RotationRecord(
                key, expected_latest, expected_latest, reason, from_micros(at), in_place=True
            )
            insert_rotation(db, record)
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
        meta = dumps(metadata or {})
        with self.transaction() as db:
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

    async def set_overrides(self, key: KeyRef, overrides: dict[str, Any]) -> SessionKeyRecord:
        with self.transaction() as db:
            cursor = db.execute(
                "UPDATE session_keys SET overrides = ? WHERE key = ?",
                (dumps(overrides), key.storage_id),
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(f"no session with key {key.name!r}")
        record = await self.get_key(key)
        assert record is not None
        return record

    async def set_title(self, key: KeyRef, title: str | None) -> SessionKeyRecord:
        with self.transaction() as db:
            cursor = db.execute(
                "UPDATE session_keys SET title = ? WHERE key = ?", (title, key.storage_id)
            )
            if cursor.rowcount == 0:
                raise SessionNotFound(f"no session with key {key.name!r}")
        record = await self.get_key(key)
        assert record is not None
        return record

    async def delete_key(self, key: KeyRef) -> None:
        stored = key.storage_id
        with self.transaction() as db:
            if not db.execute("SELECT 1 FROM session_keys WHERE key = ?", (stored,)).fetchone():
                raise SessionNotFound(f"no session with key {key.name!r}")
            db.execute("INSERT INTO erasures (key) VALUES (?)", (stored,))
            db.execute(
                "DELETE FROM messages WHERE segment_id IN"
                " (SELECT session_id FROM segments WHERE key = ?)",
                (stored,),
            )
            db.execute("DELETE FROM rotations WHERE key = ?", (stored,))
            db.execute("DELETE FROM session_keys WHERE key = ?", (stored,))
            db.execute("DELETE FROM segments WHERE key = ?", (stored,))
            db.execute("DELETE FROM erasures WHERE key = ?", (stored,))

    async def export_chain(self, key: KeyRef) -> ChainRecords:
        # One read transaction so the export is a consistent snapshot.
        self._conn.execute("BEGIN")
        try:
            record = await self.get_key(key)
            if record is None:
                raise SessionNotFound(f"no session with key {key.name!r}")
            segments = await self.chain(key)
            messages = [
                message_from_row(r)
                for r in self._conn.execute(
                    "SELECT m.segment_id, m.seq, m.role, m.content, m.status, m.metadata,"
                    " m.created_at FROM messages m"
                    " JOIN segments s ON s.session_id = m.segment_id"
                    " WHERE s.key = ? ORDER BY s.rowid, m.seq",
                    (key.storage_id,),
                )
            ]
            rotations = await self.rotations(key)
        finally:
            self._conn.execute("COMMIT")
        return ChainRecords(record, segments, messages, rotations)

    async def import_chain(
        self,
        records: ChainRecords,
        new_session_id: Callable[[], str],
        *,
        max_keys: int | None = None,
    ) -> ChainRecords:
        with self.transaction() as db:
            return replay_chain(db, records, new_session_id, max_keys=max_keys)

    async def integrity_check(self) -> str:
        row = self._conn.execute("PRAGMA integrity_check").fetchone()
        return str(row[0])

    def on_key_changed(self, callback: Callable[[KeyRef | None], None]) -> None:
        """One process owns a SQLite file, so no other process changes keys under it."""

    async def close(self) -> None:
        if self.checkpointer is not None:
            self.checkpointer.stop()
        self._conn.close()
