"""The PostgreSQL store's connections: its two pools (queries, and the advisory locks
of store/postgres/locks.py), migrating at start, news of keys other processes changed
(store/postgres/events.py), and transactions whose refused writes become domain errors.
The reads and writes built on these are in store/postgres/reads.py and store/postgres/store.py.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import asyncpg

from sessiongate.core.keys import KeyRef
from sessiongate.errors import KeyExists
from sessiongate.store.migrations import apply_postgres_migrations
from sessiongate.store.postgres.events import KeyChanged, KeyChangeListener
from sessiongate.store.postgres.liveness import ProcessLiveness
from sessiongate.store.postgres.locks import HOLDER_SETTINGS
from sessiongate.store.postgres.rows import create_pool, translate, violated

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection, Pool


class PostgresConnection:
    """The pools a `PostgresStore` (store/postgres/store.py) works through. Construct, then
    `await start()` inside the event loop that will use it (asyncpg's connections belong
    to one loop)."""

    def __init__(self, url: str, *, pool_size: int = 10) -> None:
        self.url = url
        self.pool_size = pool_size
        self._pool: Pool | None = None
        self._lock_pool: Pool | None = None
        self._events = KeyChangeListener()
        #: This process's liveness lock: claims it makes carry its token, and a claim
        #: whose token no live process holds was abandoned (store/postgres/liveness.py).
        self.liveness = ProcessLiveness()

    async def start(self) -> None:
        """Connect and migrate. Idempotent; after `stop()` it connects again."""
        if self._pool is not None:
            return
        pool = await create_pool(self.url, self.pool_size)
        try:
            async with pool.acquire() as conn:
                await apply_postgres_migrations(conn)
            # The advisory locks keep a connection for as long as a key is held; a pool of
            # their own means a lock holder never waits for a connection another holder keeps.
            # Its sessions ask the server to notice a vanished host within seconds, not
            # hours, since the locks they hold end only with them (HOLDER_SETTINGS).
            self._lock_pool = await create_pool(self.url, self.pool_size, HOLDER_SETTINGS)
            await self._events.start(self.url)
            await self.liveness.start(self.url)
        except BaseException:
            await self._events.stop()
            await pool.close()
            if self._lock_pool is not None:
                await self._lock_pool.close()
                self._lock_pool = None
            raise
        self._pool = pool

    def on_key_changed(self, callback: KeyChanged) -> None:
        """`callback(key)` after any process erases or imports `key`; `callback(None)` if
        such news may have been missed."""
        self._events.callbacks.append(callback)

    @property
    def pool(self) -> Pool:
        if self._pool is None:
            raise RuntimeError("the PostgreSQL store is not started (await Engine.start())")
        return self._pool

    @property
    def lock_pool(self) -> Pool:
        if self._lock_pool is None:
            raise RuntimeError("the PostgreSQL store is not started (await Engine.start())")
        return self._lock_pool

    @asynccontextmanager
    async def transaction(
        self, *, key: KeyRef | None = None, single_statement: bool = False
    ) -> AsyncIterator[Connection]:
        """One transaction on a pooled connection; refused writes become domain errors.
        `key`: a write that would create this key reports a racing creator as KeyExists.
        `single_statement`: the caller runs one statement, atomic on its own, so BEGIN and
        COMMIT (two round trips) are left out."""
        async with self.pool.acquire() as conn:
            try:
                if single_statement:
                    yield conn
                    return
                async with conn.transaction():
                    yield conn
            except asyncpg.PostgresError as exc:
                if key is not None and violated(exc, "session_keys_pkey"):
                    raise KeyExists(f"session key {key.name!r} already exists") from exc
                mapped = translate(exc)
                if mapped is None:
                    raise
                raise mapped from exc

    async def stop(self) -> None:
        """Close both pools. The store may be started again (on another event loop)."""
        await self._events.stop()
        await self.liveness.stop()
        pools = [p for p in (self._pool, self._lock_pool) if p is not None]
        self._pool = self._lock_pool = None
        for pool in pools:
            await pool.close()

    async def close(self) -> None:
        await self.stop()
