"""The RetentionStore protocol: which keys are idle, and the lock that keeps two
retention runs (two gateway processes, or the gateway and `sessiongate gc`) from
overlapping. SQLite: store/sqlite/retention.py; PostgreSQL: store/postgres/retention.py."""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sessiongate.core.keys import KeyRef


@dataclass(frozen=True, slots=True)
class IdleKey:
    ref: KeyRef
    #: The latest segment's last activity: the key's.
    last_activity_at: datetime


class RetentionStore(Protocol):
    async def idle_keys(self, cutoff: datetime, *, with_context: bool, limit: int) -> list[IdleKey]:
        """Keys whose latest segment's last activity is before `cutoff`, longest idle
        first, at most `limit`. `with_context`: only those whose latest segment still has
        a context (messages after any in-place clear, or a revert's continued thread)."""
        ...

    def exclusive_run(self) -> AbstractAsyncContextManager[bool]:
        """Enter to hold the retention lock for a run: yields True when this caller holds
        it, False when another run (in any process) holds it. Never waits."""
        ...
