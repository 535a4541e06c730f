"""The quota counter store port (service/quotas.py): one row per (user, quota, window),
shared by every gateway on the database. Admitting a request is one atomic statement
(INSERT ... ON CONFLICT DO UPDATE ... WHERE used < limit RETURNING used), so two
gateways can never both admit the last request of a window.
"""

from __future__ import annotations

from typing import Protocol

#: Counting one request: the new count, or no row when the window is already full.
TAKE_SQL = (
    "INSERT INTO quota_counters (user_name, kind, window_start, used) VALUES ({p1}, {p2}, {p3}, 1)"
    " ON CONFLICT (user_name, kind, window_start)"
    " DO UPDATE SET used = quota_counters.used + 1 WHERE quota_counters.used < {p4}"
    " RETURNING used"
)
#: Adding a turn's tokens: the new total.
ADD_SQL = (
    "INSERT INTO quota_counters (user_name, kind, window_start, used)"
    " VALUES ({p1}, {p2}, {p3}, {p4})"
    " ON CONFLICT (user_name, kind, window_start)"
    " DO UPDATE SET used = quota_counters.used + excluded.used"
    " RETURNING used"
)
#: Dropping the windows that ended before the current one (run when a new one starts).
PRUNE_SQL = (
    "DELETE FROM quota_counters WHERE user_name = {p1} AND kind = {p2} AND window_start < {p3}"
)


class QuotaStore(Protocol):
    async def take(self, user: str, kind: str, window_start: int, limit: int) -> int | None:
        """Count one request in the window when its count is under `limit`: the new count;
        None when the window was full (nothing counted). A new window's first request
        also removes the user's ended windows of that quota."""
        ...

    async def add(self, user: str, kind: str, window_start: int, amount: int) -> int:
        """Add `amount` to the window's count; the new count (ended windows pruned as in
        `take`)."""
        ...

    async def used(self, user: str, kind: str, window_start: int) -> int:
        """The window's count (0 when nothing was counted)."""
        ...
