"""The counts behind the per-user caps (core/session_caps.py), written once for both
stores with the dialect's placeholder.

Each count runs inside the transaction that would add the key or the segment, and reads
an index (`session_keys_by_owner`, `segments_by_key`), stopping at the cap: its cost is
bounded by the cap, not by how much a user already holds. Concurrent writers cannot both
pass a cap: SQLite's BEGIN IMMEDIATE admits one writer at a time in every process; on
PostgreSQL a rotation holds its key's row lock (store/postgres/rows.py `check_latest`),
and key creation and imports take a per-owner transaction lock first (`keys_cap_lock_name`).
"""

from __future__ import annotations


def count_keys_sql(owner: str, cap: str) -> str:
    """The owner's keys, counted up to `cap`; `owner` and `cap` are placeholders."""
    return (
        "SELECT COUNT(*) FROM"
        f" (SELECT 1 FROM session_keys WHERE owner = {owner} LIMIT {cap}) AS capped"
    )


def count_segments_sql(key: str, cap: str) -> str:
    """The key's segments, counted up to `cap`; `key` (the storage id) and `cap` are
    placeholders."""
    return f"SELECT COUNT(*) FROM (SELECT 1 FROM segments WHERE key = {key} LIMIT {cap}) AS capped"


def keys_cap_lock_name(owner: str) -> str:
    """The PostgreSQL advisory lock one owner's key creations queue on. NUL never occurs
    in a key's storage id, so this lock is never a key's own."""
    return f"keys-cap\x00{owner}"
