"""Per-key serialisation across processes: PostgreSQL advisory locks behind the in-process
FIFO queue of `KeyLocks`."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from sessiongate.core.keys import KeyRef
from sessiongate.store.locks import KeyLocks

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection, Pool

# Namespaces the hashed keys, so a key's lock id cannot be another application's constant.
_LOCK_NAMESPACE = b"sessiongate.key\x00"

#: Sent at connect time on every connection that holds advisory locks (the key locks' pool,
#: the retention run's connection). A session-level advisory lock lasts as long as its
#: session, and the server ends a session only when it learns that the client is gone: at
#: once when a gateway process dies (its kernel closes the socket), but when a gateway's
#: whole host dies or drops off the network, only by TCP keepalive, after two hours at
#: Linux's defaults, with every key that gateway held locked meanwhile. With these the
#: server probes a silent client after 10 s, every 5 s, and drops it after 3 unanswered
#: probes: a dead host's keys are free again within about 25 s. The settings apply to TCP
#: connections (a Unix socket's peer is on the same host, and dies with it).
HOLDER_SETTINGS = {
    "tcp_keepalives_idle": "10",
    "tcp_keepalives_interval": "5",
    "tcp_keepalives_count": "3",
}


def lock_id(key: str) -> int:
    """A stable signed 64-bit id for `key` (Python's hash() differs per process)."""
    digest = hashlib.blake2b(_LOCK_NAMESPACE + key.encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresKeyLocks(KeyLocks):
    """`async with locks.hold(key)`: one holder per key across every process sharing the
    database. Within a process waiters queue first-in, first-out in the inherited KeyLocks,
    so only the head of each key's queue holds a connection: it takes a session-level
    `pg_advisory_lock` on a connection borrowed from `pool` for the whole hold, and unlocks
    and returns it on exit. Different keys never wait on each other (beyond the pool's size:
    at most that many keys are held at once per process)."""

    def __init__(self, pool: Pool | Callable[[], Pool]) -> None:
        super().__init__()
        # A callable lets the engine build the locks before the pool exists (at start-up).
        self._pool = pool

    def _get_pool(self) -> Pool:
        return self._pool() if callable(self._pool) else self._pool

    @asynccontextmanager
    async def hold(self, ref: KeyRef) -> AsyncIterator[None]:
        async with super().hold(ref):
            # The owner is part of the hashed text: two users' `notes` take two locks.
            ident = lock_id(ref.storage_id)
            pool = self._get_pool()
            conn = await pool.acquire()
            try:
                await _lock(conn, ident)
                try:
                    yield
                finally:
                    await _unlock(conn, ident)
            finally:
                # Returning the connection is shielded inside asyncpg; a terminated one is
                # replaced by the pool.
                await pool.release(conn)


async def _lock(conn: Connection, ident: int) -> None:
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", ident)
    except BaseException:
        # Cancelled (or failed) while waiting: whether the server granted the lock at the
        # last moment is unknown, so drop the session, which drops whatever it held.
        conn.terminate()
        raise


async def _unlock(conn: Connection, ident: int) -> None:
    try:
        released = await conn.fetchval("SELECT pg_advisory_unlock($1)", ident)
    except BaseException:
        conn.terminate()
        raise
    if not released:
        conn.terminate()
