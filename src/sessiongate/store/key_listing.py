"""Key listings, which both stores answer alike (store/sqlite_reads.py,
store/postgres_reads.py): one query over keys and their segments, written once with the
dialect's placeholder, and the summary made from each of its rows.
"""

from __future__ import annotations

from datetime import datetime

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import KeySummary
from sessiongate.store.base import Row

_SELECT = (
    "SELECT k.key, k.owner, k.latest_session_id, COUNT(s.session_id),"
    " COALESCE(SUM(s.message_count), 0), MAX(s.last_activity_at)"
    " FROM session_keys k JOIN segments s ON s.key = k.key"
)
_ORDER = " GROUP BY k.key ORDER BY MAX(s.last_activity_at) DESC, k.key"


def list_keys_sql(owner_placeholder: str | None) -> str:
    """Every key, most recently active first; with a placeholder (`?`, `$1`) for the
    owner, only that owner's keys."""
    where = "" if owner_placeholder is None else f" WHERE k.owner = {owner_placeholder}"
    return _SELECT + where + _ORDER


def key_summary(row: Row, last_activity_at: datetime) -> KeySummary:
    """A row of `list_keys_sql`; the last activity as the dialect's driver decoded it."""
    name = KeyRef.from_storage_id(row[0]).name
    return KeySummary(name, row[1], row[2], row[3], row[4], last_activity_at)
