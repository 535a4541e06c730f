"""Per-key serialisation: one queue per session key, no lock held for idle keys.

Locks belong with the store: which lock serialises a key across processes depends on the
database (in-process for SQLite; PostgreSQL advisory locks in store/postgres/locks.py)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sessiongate.core.keys import KeyRef


class KeyLocks:
    """`async with locks.hold(key)` runs one holder per key at a time, in arrival order
    (asyncio.Lock wakes waiters first-in, first-out). Different keys never wait on each
    other. Entries are dropped when the last holder or waiter leaves."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, ref: KeyRef) -> AsyncIterator[None]:
        # Keyed by owner and name: two users' `notes` never wait on each other.
        key = ref.storage_id
        lock, users = self._locks.get(key, (None, 0))
        if lock is None:
            lock = asyncio.Lock()
        self._locks[key] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            current_lock, remaining = self._locks[key]
            if remaining <= 1:
                del self._locks[key]
            else:
                self._locks[key] = (current_lock, remaining - 1)

    def __len__(self) -> int:
        return len(self._locks)
