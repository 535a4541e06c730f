"""A channel between gateway processes over PostgreSQL LISTEN/NOTIFY, for the WebSocket
broadcast of turns (api/ws/broadcast.py, DESIGN.md §11).

Payloads are opaque text here, each under `MAX_PAYLOAD_BYTES` (PostgreSQL refuses 8000
bytes or more); what they mean, how frames are batched and how a long one is cut into
pieces is the broadcast's business. A NOTIFY goes out on a pooled connection; one
dedicated connection per process LISTENs, opened at the first WebSocket that needs it.
PostgreSQL delivers the notifications of one channel in commit order, to every listener,
the sending process's own included.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

import asyncpg

from sessiongate.store.postgres.store import PostgresStore

CHANNEL = "sessiongate_turn_frames"
#: PostgreSQL's limit is "shorter than 8000 bytes"; a margin for the server's encoding.
MAX_PAYLOAD_BYTES = 7900

log = logging.getLogger("sessiongate.store")

Receive = Callable[[str], None]
#: Called when notifications may have been missed (the LISTEN connection dropped).
Gap = Callable[[], None]


class PostgresFanout:
    def __init__(self, store: PostgresStore) -> None:
        self._store = store
        self._conn: asyncpg.Connection[Any] | None = None
        self._receive: Receive | None = None
        self._gap: Gap | None = None
        self._starting: asyncio.Lock | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False
        self.reconnects = 0

    async def notify(self, payload: str) -> None:
        await self._store.pool.execute("SELECT pg_notify($1, $2)", CHANNEL, payload)

    async def listen(self, receive: Receive, gap: Gap) -> None:
        """Start listening (idempotent; concurrent callers wait for the one start)."""
        self._receive, self._gap = receive, gap
        if self._starting is None:
            self._starting = asyncio.Lock()
        async with self._starting:
            if self._conn is None and self._reconnecting is None and not self._closed:
                await self._connect()

    async def _connect(self) -> None:
        conn: asyncpg.Connection[Any] = await asyncpg.connect(self._store.url)
        await conn.add_listener(CHANNEL, self._on_notify)
        conn.add_termination_listener(self._on_terminated)
        self._conn = conn

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        if self._receive is not None:
            self._receive(str(payload))

    def _on_terminated(self, _conn: object) -> None:
        log.warning("the LISTEN connection for WebSocket broadcasts dropped; reconnecting")
        self._conn = None
        if self._gap is not None:
            self._gap()
        if not self._closed:
            loop = asyncio.get_running_loop()
            self._reconnecting = loop.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = 0.05
        while self._conn is None and not self._closed:
            try:
                await self._connect()
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self.reconnects += 1
        if self._gap is not None:
            self._gap()  # whatever was sent while nobody listened is lost
        self._reconnecting = None

    async def stop(self) -> None:
        self._closed = True  # no reconnection while stopping
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
        self._closed = False  # a later `listen` (on another event loop) starts afresh
