"""SQLite row mapping and the small write helpers shared by the SQLite store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

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
from sessiongate.errors import Conflict, ImmutableSegment, SessionNotFound

SEGMENT_COLUMNS = (
    "s.session_id, s.key, s.created_at, s.archived_at, s.parent_ids, s.continues,"
    " s.cleared_after_seq, s.context_started_at, s.message_count, s.last_activity_at,"
    " s.created_reason, (k.latest_session_id IS NOT NULL) AS is_latest"
)
SEGMENT_FROM = "FROM segments s LEFT JOIN session_keys k ON k.latest_session_id = s.session_id"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Dictionary lookups: cheaper than calling the enum on every row of a context load.
_ROLES = {r.value: r for r in Role}
_STATUSES = {s.value: s for s in MessageStatus}
MESSAGE_COLUMNS = "segment_id, seq, role, content, status, metadata, created_at"


def to_micros(instant: datetime) -> int:
    if instant.tzinfo is None:
        raise ValueError("naive datetime reached the store")
    delta = instant - datetime(1970, 1, 1, tzinfo=UTC)
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(value: int) -> datetime:
    return _EPOCH + timedelta(microseconds=value)


def opt_micros(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


def dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def translate(exc: sqlite3.IntegrityError) -> Exception:
    text = str(exc)
    for prefix in ("segment_immutable", "latest_pointer", "rotation_log"):
        if text.startswith(prefix):
            return ImmutableSegment(text.split(": ", 1)[-1])
    return Conflict(f"the store refused the write: {text}")


def check_latest(db: sqlite3.Connection, key: KeyRef, expected: str) -> None:
    row = db.execute(
        "SELECT latest_session_id FROM session_keys WHERE key = ?", (key.storage_id,)
    ).fetchone()
    if row is None:
        raise SessionNotFound(f"no session with key {key.name!r}")
    if row[0] != expected:
        raise Conflict(
            f"latest segment of {key.name!r} is {row[0]}, not {expected}", code="latest_moved"
        )


def insert_segment(
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
            session_id,
            key,
            at,
            dumps(list(parents)),
            dumps(list(continues)),
            at,
            at,
            reason.value if reason else None,
        ),
    )


def insert_rotation(db: sqlite3.Connection, r: RotationRecord) -> None:
    db.execute(
        "INSERT INTO rotations (key, from_session_id, to_session_id, reason, at, confidence,"
        " deciding_model, in_place) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (
            r.key.storage_id,
            r.from_session_id,
            r.to_session_id,
            r.reason.value,
            to_micros(r.at),
            r.confidence,
            r.deciding_model,
            int(r.in_place),
        ),
    )


def key_record(row: sqlite3.Row | tuple[Any, ...]) -> SessionKeyRecord:
    return SessionKeyRecord(
        key=KeyRef.from_storage_id(row[0]).name,
        owner=row[1],
        latest_session_id=row[2],
        created_at=from_micros(row[3]),
        overrides=json.loads(row[4]),
        last_semantic_rotation_at=opt_micros(row[5]),
        title=row[6],
    )


def segment_from_row(row: sqlite3.Row | tuple[Any, ...]) -> Segment:
    return Segment(
        session_id=row[0],
        key=KeyRef.from_storage_id(row[1]),
        status=SegmentStatus.LATEST if row[11] else SegmentStatus.ARCHIVED,
        created_at=from_micros(row[2]),
        archived_at=opt_micros(row[3]),
        parent_ids=tuple(json.loads(row[4])),
        continues=tuple(json.loads(row[5])),
        cleared_after_seq=row[6],
        context_started_at=from_micros(row[7]),
        message_count=row[8],
        last_activity_at=from_micros(row[9]),
        created_reason=RotationReason(row[10]) if row[10] else None,
    )


def message_from_row(row: sqlite3.Row | tuple[Any, ...]) -> Message:
    metadata = row[5]
    return Message(
        session_id=row[0],
        seq=row[1],
        role=_ROLES[row[2]],
        content=row[3],
        status=_STATUSES[row[4]],
        created_at=_EPOCH + timedelta(microseconds=row[6]),
        metadata={} if metadata == "{}" else json.loads(metadata),
    )


def rotation_from_row(row: sqlite3.Row | tuple[Any, ...]) -> RotationRecord:
    return RotationRecord(
        key=KeyRef.from_storage_id(row[0]),
        from_session_id=row[1],
        to_session_id=row[2],
        reason=RotationReason(row[3]),
        at=from_micros(row[4]),
        confidence=row[5],
        deciding_model=row[6],
        in_place=bool(row[7]),
    )
