"""PostgreSQL adapter for the store port: the scale-out store that several gateway
processes share. Same tables, triggers and answers as the SQLite store; writes that race
across processes are serialised by row locks inside each transaction.

Here: the writes (keys, rotations, messages, overrides, erasure, export and import); the
pools and transactions are in store/postgres/connection.py, the reads in
store/postgres/reads.py.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

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
from sessiongate.errors import KeyExists, SegmentNotFound, SessionNotFound
from sessiongate.store.exchange import ChainRecords
from sessiongate.store.postgres.caps import check_key_cap, check_segment_cap
from sessiongate.store.postgres.chain_import import replay_chain
from sessiongate.store.postgres.events import notify_key_changed
from sessiongate.store.postgres.reads import PostgresReads
from sessiongate.store.postgres.rows import (
    APPEND_SQL,
    KEY_COLUMNS,
    ROTATION_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_FROM,
    check_latest,
    dumps,
    insert_rotation,
    insert_segment,
    key_record,
    message_from_row,
    rotation_from_row,
    segment_from_row,
    segment_in,
    utc,
)


class PostgresStore(PostgresReads):
    """A `Store` over a PostgreSQL database. Construct, then `await start()` inside the
    event loop that will use it (asyncpg's connections belong to one loop)."""

    async def create_key(
        self, key: KeyRef, session_id: str, now: datetime, *, max_keys: int | None = None
    ) -> tuple[SessionKeyRecord, Segment]:
        stored = key.storage_id
        at = utc(now)
        async with self.transaction(key=key) as db:
            if await db.fetchval("SELECT 1 FROM session_keys WHERE key = $1", stored):
                raise KeyExists(f"session key {key.name!r} already exists")
            await check_key_cap(db, key.owner, max_keys)
            await insert_segment(db, session_id, stored, at, (), (), None)
            row = await db.fetchrow(
                "INSERT INTO session_keys (key, owner, latest_session_id, created_at)"
                f" VALUES ($1, $2, $3, $4) RETURNING {KEY_COLUMNS}",
                stored,
                key.owner,
                session_id,
                at,
            )
            segment = await segment_in(db, session_id)
        assert row is not None
        return key_record(row), segment

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
        stored = key.storage_id
        at = utc(now)
        record = RotationRecord(
            key,
            expected_latest,
            new_session_id,
            reason,
            at,
            confidence,
            deciding_model,
            in_place=False,
        )
        async with self.transaction() as db:
            await check_latest(db, key, expected_latest)  # holds the key's row lock
            await check_segment_cap(db, key, max_segments)
            parents = (expected_latest, *extra_parents)
            await db.execute(
                "UPDATE segments SET archived_at = $1 WHERE session_id = $2", at, expected_latest
            )
            await insert_segment(db, new_session_id, stored, at, parents, tuple(continues), reason)
            await db.execute(
                "UPDATE session_keys SET latest_session_id = $1,"
                " last_semantic_rotation_at = CASE WHEN $3 THEN $4"
                " ELSE last_semantic_rotation_at END WHERE key = $2",
                new_session_id,
                stored,
                reason is RotationReason.SEMANTIC,
                at,
            )
            await insert_rotation(db, record)
            segment = await segment_in(db, new_session_id)
        return segment, record

    async def clear_in_place(
        self, key: KeyRef, *, expected_latest: str, reason: RotationReason, now: datetime
    ) -> tuple[Segment, RotationRecord]:
        at = utc(now)
        record = RotationRecord(key, expected_latest, expected_latest, reason, at, in_place=True)
        async with self.transaction() as db:
            await check_latest(db, key, expected_latest)
            await db.execute(
                "UPDATE segments SET cleared_after_seq = message_count, context_started_at = $1"
                " WHERE session_id = $2",
                at,
                expected_latest,
            )
            await insert_rotation(db, record)
            segment = await segment_in(db, expected_latest)
        return segment, record

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
        at = utc(now)
        meta = dumps(metadata or {})
        async with self.transaction(single_statement=True) as db:
            # One statement: the segment row lock, the insert and the count bump commit
            # together.
            seq = await db.fetchval(
                APPEND_SQL, session_id, role.value, content, status.value, meta, at
            )
        if seq is None:
            raise SegmentNotFound(f"no segment {session_id}")
        return Message(session_id, seq, role, content, status, at, metadata or {})

    async def set_overrides(self, key: KeyRef, overrides: dict[str, Any]) -> SessionKeyRecord:
        stored = key.storage_id
        async with self.transaction(single_statement=True) as db:
            row = await db.fetchrow(
                f"UPDATE session_keys SET overrides = $1 WHERE key = $2 RETURNING {KEY_COLUMNS}",
                dumps(overrides),
                stored,
            )
        if row is None:
            raise SessionNotFound(f"no session with key {key.name!r}")
        return key_record(row)

    async def set_title(self, key: KeyRef, title: str | None) -> SessionKeyRecord:
        async with self.transaction(single_statement=True) as db:
            row = await db.fetchrow(
                f"UPDATE session_keys SET title = $1 WHERE key = $2 RETURNING {KEY_COLUMNS}",
                title,
                key.storage_id,
            )
        if row is None:
            raise SessionNotFound(f"no session with key {key.name!r}")
        return key_record(row)

    async def delete_key(self, key: KeyRef) -> None:
        stored = key.storage_id
        async with self.transaction() as db:
            if not await db.fetchval(
                "SELECT 1 FROM session_keys WHERE key = $1 FOR UPDATE", stored
            ):
                raise SessionNotFound(f"no session with key {key.name!r}")
            # Lock the chain's rows first, so an append racing the erasure waits and then
            # finds no segment, instead of landing a message in a chain being removed.
            await db.execute("SELECT 1 FROM segments WHERE key = $1 FOR UPDATE", stored)
            await db.execute("INSERT INTO erasures (key) VALUES ($1)", stored)
            await db.execute(
                "DELETE FROM messages WHERE segment_id IN"
                " (SELECT session_id FROM segments WHERE key = $1)",
                stored,
            )
            await db.execute("DELETE FROM rotations WHERE key = $1", stored)
            await db.execute("DELETE FROM session_keys WHERE key = $1", stored)
            await db.execute("DELETE FROM segments WHERE key = $1", stored)
            await db.execute("DELETE FROM erasures WHERE key = $1", stored)
            await notify_key_changed(db, stored)

    async def export_chain(self, key: KeyRef) -> ChainRecords:
        stored = key.storage_id
        # One repeatable-read transaction, so the export is a consistent snapshot.
        async with (
            self.pool.acquire() as db,
            db.transaction(isolation="repeatable_read", readonly=True),
        ):
            row = await db.fetchrow(
                f"SELECT {KEY_COLUMNS} FROM session_keys WHERE key = $1", stored
            )
            if row is None:
                raise SessionNotFound(f"no session with key {key.name!r}")
            segments = await db.fetch(
                f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.key = $1 ORDER BY s.pos", stored
            )
            messages = await db.fetch(
                "SELECT m.segment_id, m.seq, m.role, m.content, m.status, m.metadata,"
                " m.created_at FROM messages m JOIN segments s ON s.session_id = m.segment_id"
                " WHERE s.key = $1 ORDER BY s.pos, m.seq",
                stored,
            )
            rotations = await db.fetch(
                f"SELECT {ROTATION_COLUMNS} FROM rotations WHERE key = $1 ORDER BY id", stored
            )
        return ChainRecords(
            key_record(row),
            [segment_from_row(r) for r in segments],
            [message_from_row(r) for r in messages],
            [rotation_from_row(r) for r in rotations],
        )

    async def import_chain(
        self,
        records: ChainRecords,
        new_session_id: Callable[[], str],
        *,
        max_keys: int | None = None,
    ) -> ChainRecords:
        key = records.key.ref
        async with self.transaction(key=key) as db:
            written = await replay_chain(db, records, new_session_id, max_keys=max_keys)
            await notify_key_changed(db, key.storage_id)
        return written
