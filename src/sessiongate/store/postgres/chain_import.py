"""Importing a chain into PostgreSQL by replaying it as the rotations that made it, so every
trigger that guards the live database also guards an import (as the SQLite import does)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from sessiongate.core.segments import Message, Segment
from sessiongate.errors import KeyExists
from sessiongate.store.compactions import COLUMNS as COMPACTION_COLUMNS
from sessiongate.store.compactions import compaction_values
from sessiongate.store.exchange import ChainRecords, remap_compaction_ids, remap_session_ids
from sessiongate.store.postgres.caps import check_key_cap
from sessiongate.store.postgres.rows import dumps, insert_rotation, insert_segment, utc

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection


async def replay_chain(
    db: Connection,
    records: ChainRecords,
    new_session_id: Callable[[], str],
    *,
    max_keys: int | None = None,
) -> ChainRecords:
    """Insert a validated chain and return it as written (segment ids already in use get
    fresh ones); the caller owns the transaction."""
    k = records.key
    stored = k.ref.storage_id
    if await db.fetchval("SELECT 1 FROM session_keys WHERE key = $1", stored):
        raise KeyExists(f"session key {k.key!r} already exists")
    await check_key_cap(db, k.owner, max_keys)
    taken = await db.fetch(
        "SELECT session_id FROM segments WHERE session_id = ANY ($1::text[])",
        [s.session_id for s in records.segments],
    )
    records = remap_session_ids(records, {row[0] for row in taken}, new_session_id)
    by_segment: dict[str, list[Message]] = {}
    for m in records.messages:
        by_segment.setdefault(m.session_id, []).append(m)
    previous: Segment | None = None
    for seg in records.segments:
        await insert_segment(
            db,
            seg.session_id,
            stored,
            seg.created_at,
            seg.parent_ids,
            seg.continues,
            seg.created_reason,
        )
        if previous is None:
            await db.execute(
                "INSERT INTO session_keys (key, owner, latest_session_id, created_at,"
                " overrides, last_semantic_rotation_at, title)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7)",
                stored,
                k.owner,
                seg.session_id,
                utc(k.created_at),
                dumps(k.overrides),
                None if k.last_semantic_rotation_at is None else utc(k.last_semantic_rotation_at),
                k.title,
            )
        else:
            assert previous.archived_at is not None
            await db.execute(
                "UPDATE segments SET archived_at = $1 WHERE session_id = $2",
                utc(previous.archived_at),
                previous.session_id,
            )
            await db.execute(
                "UPDATE session_keys SET latest_session_id = $1 WHERE key = $2",
                seg.session_id,
                stored,
            )
        messages = by_segment.get(seg.session_id, [])
        if messages:
            await db.executemany(
                "INSERT INTO messages (segment_id, seq, role, content, status, metadata,"
                " created_at) VALUES ($1, $2, $3, $4, $5, $6, $7)",
                [
                    (
                        m.session_id,
                        m.seq,
                        m.role.value,
                        m.content,
                        m.status.value,
                        dumps(m.metadata),
                        utc(m.created_at),
                    )
                    for m in messages
                ],
            )
        await db.execute(
            "UPDATE segments SET message_count = $1, cleared_after_seq = $2,"
            " context_started_at = $3, last_activity_at = $4 WHERE session_id = $5",
            seg.message_count,
            seg.cleared_after_seq,
            utc(seg.context_started_at),
            utc(seg.last_activity_at),
            seg.session_id,
        )
        previous = seg
    for rotation in records.rotations:
        await insert_rotation(db, rotation)
    return await _insert_working_set(db, records, new_session_id)


async def _insert_working_set(
    db: Connection, records: ChainRecords, new_id: Callable[[], str]
) -> ChainRecords:
    """The chain's compaction records (ids already in use get fresh ones) and pins."""
    if records.compactions:
        taken = await db.fetch(
            "SELECT compaction_id FROM compactions WHERE compaction_id = ANY ($1::text[])",
            [c.compaction_id for c in records.compactions],
        )
        records = remap_compaction_ids(records, {row[0] for row in taken}, new_id)
        await db.executemany(
            f"INSERT INTO compactions ({COMPACTION_COLUMNS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
            [compaction_values(c, utc) for c in records.compactions],
        )
    if records.pins:
        await db.executemany(
            "INSERT INTO pins (session_id, seq, created_at) VALUES ($1, $2, $3)",
            [(p.session_id, p.seq, utc(p.created_at)) for p in records.pins],
        )
    return records
