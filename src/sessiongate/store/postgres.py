"""PostgreSQL adapter for the store port: the scale-out store that several gateway
processes share. Same tables, triggers and answers as the SQLite store; writes that race
across processes are serialised by row locks inside each transaction."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Any

import asyncpg

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import (
    KeySummary,
    Message,
    MessageStatus,
    RecallFragment,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.errors import KeyExists, SegmentNotFound, SessionNotFound
from sessiongate.store.exchange import ChainRecords
from sessiongate.store.migrations import apply_postgres_migrations
from sessiongate.store.postgres_events import KeyChanged, KeyChangeListener, notify_key_changed
from sessiongate.store.postgres_import import replay_chain
from sessiongate.store.postgres_rows import (
    APPEND_SQL,
    KEY_COLUMNS,
    MESSAGE_COLUMNS,
    RECALL_SQL,
    ROTATION_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_FROM,
    check_latest,
    create_pool,
    dumps,
    insert_rotation,
    insert_segment,
    key_record,
    limit_or_all,
    message_from_row,
    rotation_from_row,
    segment_from_row,
    segment_in,
    translate,
    utc,
    violated,
)
from sessiongate.store.recall import recall_fragment, recall_words

if TYPE_CHECKING:
    from sessiongate.store.postgres_rows import Connection, Pool


class PostgresStore:
    """A `Store` over a PostgreSQL database. Construct, then `await start()` inside the
    event loop that will use it (asyncpg's connections belong to one loop)."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self.pool_size = pool_size
        self._pool: Pool | None = None
        self._lock_pool: Pool | None = None
        self._events = KeyChangeListener()

    async def start(self) -> None:
        """Connect and migrate. Idempotent; after `stop()` it connects again."""
        if self._pool is not None:
            return
        pool = await create_pool(self.url, self.pool_size)
        try:
            async with pool.acquire() as conn:
                await apply_postgres_migrations(conn)
            # The advisory locks keep a connection for as long as a key is held; a pool of
            # their own means a lock holder never waits for a connection another holder keeps.
            self._lock_pool = await create_pool(self.url, self.pool_size)
            await self._events.start(self.url)
        except BaseException:
            await pool.close()
            if self._lock_pool is not None:
                await self._lock_pool.close()
                self._lock_pool = None
            raise
        self._pool = pool

    def on_key_changed(self, callback: KeyChanged) -> None:
        """`callback(key)` after any process erases or imports `key`; `callback(None)` if
        such news may have been missed."""
        self._events.callbacks.append(callback)

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise RuntimeError("the PostgreSQL store is not started (await Engine.start())")
        return self._pool

    @property
    def lock_pool(self) -> Pool:
        if self._lock_pool is None:
            raise RuntimeError("the PostgreSQL store is not started (await Engine.start())")
        return self._lock_pool

    @asynccontextmanager
    async def transaction(
        self, *, key: KeyRef | None = None, single_statement: bool = False
    ) -> AsyncIterator[Connection]:
        """One transaction on a pooled connection; refused writes become domain errors.
        `key`: a write that would create this key reports a racing creator as KeyExists.
        `single_statement`: the caller runs one statement, atomic on its own, so BEGIN and
        COMMIT (two round trips) are left out."""
        async with self.pool.acquire() as conn:
            try:
                if single_statement:
                    yield conn
                    return
                async with conn.transaction():
                    yield conn
            except asyncpg.PostgresError as exc:
                if key is not None and violated(exc, "session_keys_pkey"):
                    raise KeyExists(f"session key {key.name!r} already exists") from exc
                mapped = translate(exc)
                if mapped is None:
                    raise
                raise mapped from exc

    # -- reads ------------------------------------------------------------------

    async def get_key(self, key: KeyRef) -> SessionKeyRecord | None:
        stored = key.storage_id
        row = await self.pool.fetchrow(
            f"SELECT {KEY_COLUMNS} FROM session_keys WHERE key = $1", stored
        )
        return None if row is None else key_record(row)

    async def get_segment(self, session_id: str) -> Segment | None:
        row = await self.pool.fetchrow(
            f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.session_id = $1", session_id
        )
        return None if row is None else segment_from_row(row)

    async def latest_segment(self, key: KeyRef) -> Segment:
        stored = key.storage_id
        row = await self.pool.fetchrow(
            f"SELECT {SEGMENT_COLUMNS} FROM session_keys k"
            " JOIN segments s ON s.session_id = k.latest_session_id WHERE k.key = $1",
            stored,
        )
        if row is None:
            raise SessionNotFound(f"no session with key {key.name!r}")
        return segment_from_row(row)

    async def chain(self, key: KeyRef) -> list[Segment]:
        stored = key.storage_id
        rows = await self.pool.fetch(
            f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.key = $1 ORDER BY s.pos", stored
        )
        return [segment_from_row(r) for r in rows]

    async def thread_tail(self, segment: Segment, limit: int) -> list[Message]:
        collected: list[Message] = []
        async with self.pool.acquire() as conn:
            await self._collect_tail(conn, segment, limit, collected, depth=0)
        collected.reverse()
        return collected

    async def _collect_tail(
        self, db: Connection, segment: Segment, limit: int, out: list[Message], depth: int
    ) -> None:
        """Newest-first collection along the continuation links (which only point back)."""
        if limit <= 0 or depth > 64:
            return
        rows = await db.fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment_id = $1 AND seq > $2"
            " ORDER BY seq DESC LIMIT $3",
            segment.session_id,
            segment.cleared_after_seq,
            limit,
        )
        out.extend(message_from_row(r) for r in rows)
        remaining = limit - len(rows)
        for parent_id in reversed(segment.continues):
            if remaining <= 0:
                break
            row = await db.fetchrow(
                f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.session_id = $1", parent_id
            )
            if row is None:
                raise SegmentNotFound(f"no segment {parent_id}")
            before = len(out)
            await self._collect_tail(db, segment_from_row(row), remaining, out, depth + 1)
            remaining -= len(out) - before

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Message]:
        rows = await self.pool.fetch(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE segment_id = $1 AND seq > $2"
            " ORDER BY seq LIMIT $3",
            session_id,
            after_seq,
            limit_or_all(limit),
        )
        return [message_from_row(r) for r in rows]

    async def rotations(self, key: KeyRef) -> list[RotationRecord]:
        stored = key.storage_id
        rows = await self.pool.fetch(
            f"SELECT {ROTATION_COLUMNS} FROM rotations WHERE key = $1 ORDER BY id", stored
        )
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
        stored = key.storage_id
        rows = await self.pool.fetch(
            RECALL_SQL, recall_words(query), stored, list(exclude_session_ids), limit_or_all(limit)
        )
        return [
            recall_fragment(r[0], r[1], r[2], r[3], r[4], score=float(r[5]), rationale=rationale)
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
            sql += " WHERE k.owner = $1"
            params = (owner,)
        sql += " GROUP BY k.key ORDER BY MAX(s.last_activity_at) DESC, k.key"
        rows = await self.pool.fetch(sql, *params)
        return [
            KeySummary(KeyRef.from_storage_id(r[0]).name, r[1], r[2], r[3], r[4], r[5])
            for r in rows
        ]

    async def count_keys(self) -> int:
        count = await self.pool.fetchval("SELECT COUNT(*) FROM session_keys")
        return int(count)

    # -- writes -----------------------------------------------------------------

    async def create_key(
        self, key: KeyRef, session_id: str, now: datetime
    ) -> tuple[SessionKeyRecord, Segment]:
        stored = key.storage_id
        at = utc(now)
        async with self.transaction(key=key) as db:
            if await db.fetchval("SELECT 1 FROM session_keys WHERE key = $1", stored):
                raise KeyExists(f"session key {key.name!r} already exists")
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
            await check_latest(db, key, expected_latest)
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
        self, records: ChainRecords, new_session_id: Callable[[], str]
    ) -> ChainRecords:
        key = records.key.ref
        async with self.transaction(key=key) as db:
            written = await replay_chain(db, records, new_session_id)
            await notify_key_changed(db, key.storage_id)
        return written

    async def stop(self) -> None:
        """Close both pools. The store may be started again (on another event loop)."""
        await self._events.stop()
        pools = [p for p in (self._pool, self._lock_pool) if p is not None]
        self._pool = self._lock_pool = None
        for pool in pools:
            await pool.close()

    async def close(self) -> None:
        await self.stop()
