"""Key listings, which both stores answer alike (store/sqlite/reads.py,
store/postgres/reads.py): one query over keys and their segments, written once with the
dialect's placeholders, and the summary made from each of its rows.

Each row carries the key's title: the one set, else the head of its first user message
(core/titles.py shortens it), read only for keys without one.

Keys come in storage-id order (`owner/name`, byte order: both stores compare keys with
the C collation), which the primary key's index already holds: a page starts where the
previous one ended (`after`) and costs its own keys' segments, never a sort of every key
(core/key_pages.py says why the order is not recency).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import KeySummary
from sessiongate.core.titles import TITLE_SOURCE_CHARS, auto_title
from sessiongate.store.base import Row


def list_keys_sql(placeholder: Callable[[int], str], *, by_owner: bool) -> str:
    """Keys after a storage id (parameter 1), at most a number of them (parameter 2; no
    limit: -1 on SQLite, NULL on PostgreSQL), and with `by_owner` only one owner's
    (parameter 3). `placeholder(n)` is the dialect's n-th parameter (`?`, `$n`)."""
    owner = f" AND owner = {placeholder(3)}" if by_owner else ""
    return (
        "SELECT k.key, k.owner, k.latest_session_id, COUNT(s.session_id),"
        " COALESCE(SUM(s.message_count), 0), MAX(s.last_activity_at), k.title,"
        f" CASE WHEN k.title IS NULL THEN ({FIRST_USER_TEXT}) END"
        " FROM (SELECT key, owner, latest_session_id, title FROM session_keys"
        f" WHERE key > {placeholder(1)}{owner} ORDER BY key LIMIT {placeholder(2)}) AS k"
        " JOIN segments s ON s.key = k.key"
        " GROUP BY k.key, k.owner, k.latest_session_id, k.title ORDER BY k.key"
    )


#: The head of a listed key's first user message, in its first segment (the one no rotation
#: made): what an automatic title is made of. Two index probes per key of the page
#: (segments by key, messages by segment and seq), and only for keys without a title.
FIRST_USER_TEXT = (
    f"SELECT substr(m.content, 1, {TITLE_SOURCE_CHARS}) FROM messages m"
    " WHERE m.segment_id = (SELECT f.session_id FROM segments f"
    " WHERE f.key = k.key AND f.created_reason IS NULL ORDER BY f.created_at LIMIT 1)"
    " AND m.role = 'user' ORDER BY m.seq LIMIT 1"
)


def after_storage_id(after: KeyRef | None) -> str:
    """Where a listing starts: every storage id sorts after the empty string."""
    return "" if after is None else after.storage_id


def key_summary(row: Row, last_activity_at: datetime) -> KeySummary:
    """A row of `list_keys_sql`; the last activity as the dialect's driver decoded it."""
    name = KeyRef.from_storage_id(row[0]).name
    title = row[6] if row[6] is not None else auto_title(row[7])
    return KeySummary(name, row[1], row[2], row[3], row[4], last_activity_at, title)
