"""Importing a chain into SQLite by replaying it as the rotations that made it, so every
trigger that guards the live database also guards an import."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from sessiongate.core.segments import Message, Segment
from sessiongate.errors import KeyExists
from sessiongate.store.compactions import COLUMNS as COMPACTION_COLUMNS
from sessiongate.store.compactions import compaction_values
from sessiongate.store.exchange import ChainRecords, remap_compaction_ids, remap_session_ids
from sessiongate.store.sqlite.caps import check_key_cap
from sessiongate.store.sqlite.rows import dumps, insert_rotation, insert_segment, to_micros


def replay_chain(
    db: sqlite3.Connection,
    records: ChainRecords,
    new_session_id: Callable[[], str],
    *,
    max_keys: int | None = None,
) -> ChainRecords:
    """Insert a validated chain and return it as written (segment ids already in use get
    fresh ones); the caller owns the transaction."""
    k = records.key
    stored = k.ref.storage_id
    if db.execute("SELECT 1 FROM session_keys WHERE key = ?", (stored,)).fetchone():
        raise KeyExists(f"session key {k.key!r} already exists")
    check_key_cap(db, k.owner, max_keys)
    taken = {
        row[0]
        for row in db.execute(
            f"SELECT session_id FROM segments WHERE session_id IN"
            f" ({','.join('?' for _ in records.segments)})",
            [s.session_id for s in records.segments],
        )
    }
    records = remap_session_ids(records, taken, new_session_id)
    by_segment: dict[str, list[Message]] = {}
    for m in records.messages:
        by_segment.setdefault(m.session_id, []).append(m)
    previous: Segment | None = None
    for seg in records.segments:
        insert_segment(
            db,
            seg.session_id,
            stored,
            to_micros(seg.created_at),
            seg.parent_ids,
            seg.continues,
            seg.created_reason,
        )
        if previous is None:
            db.execute(
                "INSERT INTO session_keys (key, owner, latest_session_id, created_at,"
                " overrides, last_semantic_rotation_at, title) VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    stored,
                    k.owner,
                    seg.session_id,
                    to_micros(k.created_at),
                    dumps(k.overrides),
                    None
                    if k.last_semantic_rotation_at is None
                    else to_micros(k.last_semantic_rotation_at),
                    k.title,
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
                (seg.session_id, stored),
            )
        db.executemany(
            "INSERT INTO messages (segment_id, seq, role, content, status, metadata,"
            " created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    m.session_id,
                    m.seq,
                    m.role.value,
                    m.content,
                    m.status.value,
                    dumps(m.metadata),
                    to_micros(m.created_at),
                )
                for m in by_segment.get(seg.session_id, [])
            ],
        )
        db.execute(
            "UPDATE segments SET message_count = ?, cleared_after_seq = ?,"
            " context_started_at = ?, last_activity_at = ? WHERE session_id = ?",
            (
                seg.message_count,
                seg.cleared_after_seq,
                to_micros(seg.context_started_at),
                to_micros(seg.last_activity_at),
                seg.session_id,
            ),
        )
        previous = seg
    for rotation in records.rotations:
        insert_rotation(db, rotation)
    return _insert_working_set(db, records, new_session_id)


def _insert_working_set(
    db: sqlite3.Connection, records: ChainRecords, new_id: Callable[[], str]
) -> ChainRecords:
    """The chain's compaction records (ids already in use get fresh ones) and pins."""
    if records.compactions:
        ids = [c.compaction_id for c in records.compactions]
        taken = {
            row[0]
            for row in db.execute(
                "SELECT compaction_id FROM compactions WHERE compaction_id IN"
                f" ({','.join('?' for _ in ids)})",
                ids,
            )
        }
        records = remap_compaction_ids(records, taken, new_id)
        db.executemany(
            f"INSERT INTO compactions ({COMPACTION_COLUMNS}) VALUES "
            "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [compaction_values(c, to_micros) for c in records.compactions],
        )
    db.executemany(
        "INSERT INTO pins (session_id, seq, created_at) VALUES (?, ?, ?)",
        [(p.session_id, p.seq, to_micros(p.created_at)) for p in records.pins],
    )
    return records
