"""The mode store port: which modes a user has enabled, and every unlock of one
(DESIGN.md §8).

An unlock is a row of its own and is never rewritten except to record that it was locked
(`locked_at`, `locked_by`), so the rows are the history: who unlocked and locked what,
and when. The pure rules (does an unlock hold at `now`?) are core/modes.py's; the store
only narrows the rows to those that may matter.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sessiongate.core.modes import ModeUnlock
from sessiongate.core.users import User
from sessiongate.store.base import Row

#: The columns both stores write and select, in the order `unlock_from_row` reads.
UNLOCK_COLUMNS = (
    "unlock_id, user_name, mode, unlocked_at, expires_at, unlocked_by, locked_at, locked_by"
)


def unlock_from_row(row: Row, to_time: Callable[[Any], datetime], offset: int = 0) -> ModeUnlock:
    """A row of `UNLOCK_COLUMNS` starting at `offset`; `to_time` reads the store's time."""
    locked_at = row[offset + 6]
    return ModeUnlock(
        unlock_id=row[offset],
        user=row[offset + 1],
        mode=row[offset + 2],
        unlocked_at=to_time(row[offset + 3]),
        expires_at=to_time(row[offset + 4]),
        unlocked_by=row[offset + 5],
        locked_at=None if locked_at is None else to_time(locked_at),
        locked_by=row[offset + 7],
    )


class ModeStore(Protocol):
    async def set_enabled(
        self, user_name: str, modes: Sequence[str], now: datetime, by: str
    ) -> User | None:
        """Replace the user's enabled modes and, in the same transaction, lock (as `by`, at
        `now`) every unlock of a mode no longer enabled that still holds, so that enabling
        it again later does not revive an old unlock. The user as it now is; None for an
        unknown user (nothing changes)."""
        ...

    async def enabled(self, user_name: str) -> tuple[str, ...] | None:
        """The user's enabled modes; None for an unknown user."""
        ...

    async def access(
        self, user_name: str, mode: str, now: datetime
    ) -> tuple[tuple[str, ...], list[ModeUnlock]] | None:
        """In one indexed query, what deciding a turn's mode needs: the user's enabled modes
        and their unlocks of `mode` that have not expired or been locked by `now`. None for
        an unknown user."""
        ...

    async def add_unlock(self, unlock: ModeUnlock) -> None: ...

    async def lock(self, user_name: str, mode: str, now: datetime, by: str) -> list[ModeUnlock]:
        """Stamp `locked_at = now`, `locked_by = by` on every unlock of the user's `mode`
        holding at `now`; those unlocks as they now are (none: nothing was unlocked)."""
        ...

    async def holding(self, user_name: str, now: datetime) -> list[ModeUnlock]:
        """The user's unlocks, of every mode, that have not expired or been locked by
        `now`, by mode then expiry."""
        ...

    async def history(self, user_name: str, limit: int) -> list[ModeUnlock]:
        """The user's newest `limit` unlocks, newest first, locked or not."""
        ...
