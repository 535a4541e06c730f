"""Cross-process events over PostgreSQL LISTEN/NOTIFY (DESIGN §4).

A key erased or re-imported by one gateway process must not live on in another's memory:
each process keeps recent context per key (service/thread_cache.py), and a re-imported
chain can bring back the same session ids with other content. The write sends
`NOTIFY` inside its own transaction, so it is delivered exactly when the change commits,
to every process listening on the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import asyncpg

from sessiongate.core.keys import KeyRef

if TYPE_CHECKING:
    from sessiongate.store.postgres.rows import Connection

CHANNEL = "sessiongate_key_changed"
#: Called with the key that changed, or None when changes may have been missed (the
#: listening connection dropped): then everything remembered must be forgotten.
KeyChanged = Callable[[KeyRef | None], None]

log = logging.getLogger("sessiongate.store")


async def notify_key_changed(db: Connection, key: str) -> None:
    """Announce, on commit of `db`'s transaction, that `key`'s chain was replaced."""
    await db.execute("SELECT pg_notify($1, $2)", CHANNEL, key)


class KeyChangeListener:
    """One dedicated connection that LISTENs and hands each key to the callbacks."""

    def __init__(self) -> None:
        self.callbacks: list[KeyChanged] = []
        self.reconnects = 0
        self._conn: asyncpg.Connection[Any] | None = None
        self._url = ""
        self._reconnecting: asyncio.Task[None] | None = None

    async def start(self, url: str) -> None:
        if self._conn is not None:
            return
        self._url = url
        conn: asyncpg.Connection[Any] = await asyncpg.connect(url)
        await conn.add_listener(CHANNEL, self._on_notify)
        conn.add_termination_listener(self._on_terminated)
        self._conn = conn

    async def stop(self) -> None:
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnecting
            self._reconnecting = None
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_terminated)
            with contextlib.suppress(Exception):
                await conn.close()

    def _emit(self, key: KeyRef | None) -> None:
        for callback in self.callbacks:
            callback(key)

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        # The payload is the key's stored form, `owner/name`.
        self._emit(KeyRef.from_storage_id(str(payload)))

    def _on_terminated(self, _conn: object) -> None:
        log.warning("the LISTEN connection to PostgreSQL dropped; forgetting cached context")
        self._conn = None
        self._emit(None)
        self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = 0.05
        while self._conn is None:
            try:
                await self.start(self._url)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.reconnects += 1
        # Whatever changed while nobody listened is unknown: forget again.
        self._emit(None)
        self._reconnecting = None
