"""The PostgreSQL store's reads (the read half of the `Store` port, store/base.py): a
key's record, its segments and rotation log, a segment's thread along its continuation
links, message pages, full-text recall over archived segments, and key listings.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

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
from sessiongate.store.postgres.connection import PostgresConnection
from sessiongate.store.postgres.rows import (
    KEY_COLUMNS,
    MESSAGE_COLUMNS,
    RECALL_SQL,
    ROTATION_COLUMNS,
    SEGMENT_COLUMNS,
    SEGMENT_FROM,
    key_record,
    limit_or_all,
    message_from_row,
    rotation_from_row,
    segment_from_row,
)
from sessiongate.store.recall import recall_fragment, recall_words

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection


class PostgresReads(PostgresConnection):
    """What `PostgresStore` (store/postgres/store.py) reads, each on a pooled connection."""

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

    async def list_keys(
        self, owner: str | None = None, *, after: KeyRef | None = None, limit: int | None = None
    ) -> list[KeySummary]:
        sql = list_keys_sql(lambda n: f"${n}", by_owner=owner is not None)
        params: tuple[object, ...] = (after_storage_id(after), limit)  # LIMIT NULL: all
        rows = await self.pool.fetch(sql, *(params if owner is None else (*params, owner)))
        return [key_summary(r, r[5]) for r in rows]

    async def count_keys(self) -> int:
        count = await self.pool.fetchval("SELECT COUNT(*) FROM session_keys")
        return int(count)
