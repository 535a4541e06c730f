"""The per-user caps on PostgreSQL (store/caps.py), checked inside the caller's
transaction.

Keys: two creations for one owner (two keys, two gateway processes) would each count
before either commits, so they first queue on the owner's transaction-scoped advisory
lock; the second counts once the first has committed (READ COMMITTED: each statement
reads what is committed when it starts). Segments: the rotation already holds its key's
row lock (`check_latest`), which serialises every rotation of that key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sessiongate.core.keys import KeyRef
from sessiongate.core.session_caps import KeyLimitReached, SegmentLimitReached, at_cap
from sessiongate.store.caps import count_keys_sql, count_segments_sql, keys_cap_lock_name
from sessiongate.store.postgres.locks import lock_id

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection


async def check_key_cap(db: Connection, owner: str, max_keys: int | None) -> None:
    """Raise KeyLimitReached when `owner` already has `max_keys` keys. The owner's lock
    is held until the caller's transaction ends."""
    if max_keys is None:
        return
    await db.execute("SELECT pg_advisory_xact_lock($1)", lock_id(keys_cap_lock_name(owner)))
    count = await db.fetchval(count_keys_sql("$1", "$2"), owner, max_keys)
    if at_cap(int(count), max_keys):
        raise KeyLimitReached(max_keys)


async def check_segment_cap(db: Connection, key: KeyRef, max_segments: int | None) -> None:
    """Raise SegmentLimitReached when `key` already holds `max_segments` segments; the
    caller holds the key's row lock."""
    if max_segments is None:
        return
    count = await db.fetchval(count_segments_sql("$1", "$2"), key.storage_id, max_segments)
    if at_cap(int(count), max_segments):
        raise SegmentLimitReached(key.name, max_segments)
