"""The per-user caps on SQLite (store/caps.py): each check runs inside the caller's
BEGIN IMMEDIATE transaction, so no other writer, in any process, counts or writes between
the count and the write it guards."""

from __future__ import annotations

import sqlite3

from sessiongate.core.keys import KeyRef
from sessiongate.core.session_caps import KeyLimitReached, SegmentLimitReached, at_cap
from sessiongate.store.caps import count_keys_sql, count_segments_sql


def check_key_cap(db: sqlite3.Connection, owner: str, max_keys: int | None) -> None:
    """Raise KeyLimitReached when `owner` already has `max_keys` keys."""
    if max_keys is None:
        return
    count = db.execute(count_keys_sql("?", "?"), (owner, max_keys)).fetchone()[0]
    if at_cap(int(count), max_keys):
        raise KeyLimitReached(max_keys)


def check_segment_cap(db: sqlite3.Connection, key: KeyRef, max_segments: int | None) -> None:
    """Raise SegmentLimitReached when `key` already holds `max_segments` segments."""
    if max_segments is None:
        return
    count = db.execute(count_segments_sql("?", "?"), (key.storage_id, max_segments)).fetchone()[0]
    if at_cap(int(count), max_segments):
        raise SegmentLimitReached(key.name, max_segments)
