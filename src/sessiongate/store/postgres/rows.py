"""PostgreSQL connections, queries, row mapping, error translation and the small write
helpers shared by the PostgreSQL store, its import and its user store."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TypeAlias

import asyncpg

from sessiongate.config.database import redact_url
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import (
    Message,
    MessageStatus,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SegmentStatus,
    SessionKeyRecord,
)
from sessiongate.errors import (
    ConfigError,
    Conflict,
    ImmutableSegment,
    InvalidContent,
    SegmentNotFound,
    SessionNotFound,
)

if TYPE_CHECKING:
    from asyncpg.pool import PoolConnectionProxy

    Pool: TypeAlias = asyncpg.Pool[asyncpg.Record]
    Connection: TypeAlias = asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]

SEGMENT_COLUMNS = (
    "s.session_id, s.key, s.created_at, s.archived_at, s.parent_ids, s.continues,"
    " s.cleared_after_seq, s.context_started_at, s.message_count, s.last_activity_at,"
    " s.created_reason, (k.latest_session_id IS NOT NULL) AS is_latest"
)
SEGMENT_FROM = "FROM segments s LEFT JOIN session_keys k ON k.latest_session_id = s.session_id"
MESSAGE_COLUMNS = "segment_id, seq, role, content, status, metadata, created_at"
KEY_COLUMNS = (
    "key, owner, latest_session_id, created_at, overrides, last_semantic_rotation_at, title"
)
ROTATION_COLUMNS = (
    "key, from_session_id, to_session_id, reason, at, confidence, deciding_model, in_place"
)
# Dictionary lookups: cheaper than calling the enum on every row of a context load.
_ROLES = {r.value: r for r in Role}
_STATUSES = {s.value: s for s in MessageStatus}
# Messages the guard triggers raise; the same rule names as the SQLite schema's.
_GUARDS = ("segment_immutable", "latest_pointer", "rotation_log")


def utc(instant: datetime) -> datetime:
    """The instant in UTC, as the store hands it back (and as SQLite's store does). A naive
    datetime has no instant: refuse it, with SQLite's store's words."""
    if instant.tzinfo is None:
        raise ValueError("naive datetime reached the store")
    return instant.astimezone(UTC)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def limit_or_all(limit: int) -> int | None:
    """SQLite reads a negative LIMIT as "no limit"; PostgreSQL's LIMIT NULL is the same."""
    return None if limit < 0 else limit


def translate(exc: asyncpg.PostgresError) -> Exception | None:
    """The domain error for a refused write, or None when `exc` is not one."""
    if isinstance(exc, asyncpg.exceptions.RaiseError):
        text = exc.args[0] if exc.args else str(exc)
        if str(text).startswith(_GUARDS):
            return ImmutableSegment(str(text).split(": ", 1)[-1])
        return Conflict(f"the store refused the write: {text}")
    if isinstance(exc, asyncpg.exceptions.IntegrityConstraintViolationError):
        return Conflict(f"the store refused the write: {exc}")
    if isinstance(
        exc,
        asyncpg.exceptions.CharacterNotInRepertoireError
        | asyncpg.exceptions.UntranslatableCharacterError,
    ):
        # Text columns cannot hold U+0000; the live write path refuses it before this.
        return InvalidContent(f"text the database cannot store (a NUL character?): {exc}")
    return None


def violated(exc: asyncpg.PostgresError, constraint: str) -> bool:
    return (
        isinstance(exc, asyncpg.exceptions.UniqueViolationError)
        and getattr(exc, "constraint_name", None) == constraint
    )


async def check_latest(db: Connection, key: KeyRef, expected: str) -> None:
    """Lock the key row (rotations of one key serialise here, across processes) and check
    that its latest segment is still `expected`."""
    current = await db.fetchval(
        "SELECT latest_session_id FROM session_keys WHERE key = $1 FOR UPDATE", key.storage_id
    )
    if current is None:
        raise SessionNotFound(f"no session with key {key.name!r}")
    if current != expected:
        raise Conflict(
            f"latest segment of {key.name!r} is {current}, not {expected}", code="latest_moved"
        )


async def insert_segment(
    db: Connection,
    session_id: str,
    key: str,
    at: datetime,
    parents: Sequence[str],
    continues: Sequence[str],
    reason: RotationReason | None,
) -> None:
    await db.execute(
        "INSERT INTO segments (session_id, key, created_at, parent_ids, continues,"
        " context_started_at, last_activity_at, created_reason)"
        " VALUES ($1, $2, $3, $4, $5, $3, $3, $6)",
        session_id,
        key,
        utc(at),
        list(parents),
        list(continues),
        reason.value if reason else None,
    )


async def insert_rotation(db: Connection, r: RotationRecord) -> None:
    await db.execute(
        "INSERT INTO rotations (key, from_session_id, to_session_id, reason, at, confidence,"
        " deciding_model, in_place) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        r.key.storage_id,
        r.from_session_id,
        r.to_session_id,
        r.reason.value,
        utc(r.at),
        r.confidence,
        r.deciding_model,
        r.in_place,
    )


def key_record(row: asyncpg.Record) -> SessionKeyRecord:
    return SessionKeyRecord(
        key=KeyRef.from_storage_id(row[0]).name,
        owner=row[1],
        latest_session_id=row[2],
        created_at=row[3],
        overrides=json.loads(row[4]),
        last_semantic_rotation_at=row[5],
        title=row[6],
    )


def segment_from_row(row: asyncpg.Record) -> Segment:
    return Segment(
        session_id=row[0],
        key=KeyRef.from_storage_id(row[1]),
        status=SegmentStatus.LATEST if row[11] else SegmentStatus.ARCHIVED,
        created_at=row[2],
        archived_at=row[3],
        parent_ids=tuple(row[4]),
        continues=tuple(row[5]),
        cleared_after_seq=row[6],
        context_started_at=row[7],
        message_count=row[8],
        last_activity_at=row[9],
        created_reason=RotationReason(row[10]) if row[10] else None,
    )


def message_from_row(row: asyncpg.Record) -> Message:
    metadata = row[5]
    return Message(
        session_id=row[0],
        seq=row[1],
        role=_ROLES[row[2]],
        content=row[3],
        status=_STATUSES[row[4]],
        created_at=row[6],
        metadata={} if metadata == "{}" else json.loads(metadata),
    )


def rotation_from_row(row: asyncpg.Record) -> RotationRecord:
    return RotationRecord(
        key=KeyRef.from_storage_id(row[0]),
        from_session_id=row[1],
        to_session_id=row[2],
        reason=RotationReason(row[3]),
        at=row[4],
        confidence=row[5],
        deciding_model=row[6],
        in_place=row[7],
    )


CONNECT_TIMEOUT_SECONDS = 10.0

# One statement, so one round trip: lock the segment row, take the next seq, insert, bump
# the count. FOR UPDATE makes concurrent appends from any process queue on the row, and
# re-reads the newest message_count once the lock is granted.
APPEND_SQL = """
WITH seg AS (
    SELECT message_count + 1 AS seq FROM segments WHERE session_id = $1 FOR UPDATE
), ins AS (
    INSERT INTO messages (segment_id, seq, role, content, status, metadata, created_at)
    SELECT $1, seg.seq, $2, $3, $4, $5, $6 FROM seg
    RETURNING seq
), bump AS (
    UPDATE segments SET message_count = ins.seq,
        last_activity_at = GREATEST(last_activity_at, $6)
    FROM ins WHERE session_id = $1
)
SELECT seq FROM ins
"""

# Each query word becomes its own plainto_tsquery (so no user text is ever parsed as
# tsquery syntax); the words are OR-ed, as the SQLite store's MATCH query does.
RECALL_SQL = """
SELECT m.segment_id, m.seq, m.role, m.content, m.created_at,
       ts_rank(ms.document, q.query) AS rank
FROM (
    SELECT string_agg('(' || t::text || ')', ' | ')::tsquery AS query
    FROM unnest($1::text[]) AS w, plainto_tsquery('simple', w) AS t
    WHERE numnode(t) > 0
) q
JOIN message_search ms ON ms.document @@ q.query
JOIN messages m ON m.id = ms.message_id
JOIN segments s ON s.session_id = m.segment_id
JOIN session_keys k ON k.key = s.key
WHERE s.key = $2 AND s.session_id <> k.latest_session_id
  AND s.session_id <> ALL ($3::text[])
  AND (m.metadata ->> 'offline') IS DISTINCT FROM 'true'
  AND (m.metadata -> 'classification' ->> 'label') IS DISTINCT FROM 'unsafe'
ORDER BY rank DESC, m.id
LIMIT $4
"""


async def create_pool(
    url: str, size: int, server_settings: Mapping[str, str] | None = None
) -> Pool:
    """A pool of up to `size` connections, or a ConfigError naming the (redacted) URL.
    `server_settings`: session settings sent when each connection opens."""
    try:
        return await asyncpg.create_pool(
            url,
            min_size=1,
            max_size=size,
            timeout=CONNECT_TIMEOUT_SECONDS,
            server_settings=dict(server_settings) if server_settings else None,
        )
    except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
        reason = str(exc) or type(exc).__name__
        raise ConfigError(
            f"database.url: cannot connect to PostgreSQL at {redact_url(url)}: {reason}"
        ) from None


async def segment_in(db: Connection, session_id: str) -> Segment:
    row = await db.fetchrow(
        f"SELECT {SEGMENT_COLUMNS} {SEGMENT_FROM} WHERE s.session_id = $1", session_id
    )
    if row is None:
        raise SegmentNotFound(f"no segment {session_id}")
    return segment_from_row(row)
