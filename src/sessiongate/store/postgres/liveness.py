"""Whether a gateway process is still alive, as PostgreSQL sees it.

Each process on the database holds, on a connection of its own for as long as it runs, a
session-level advisory lock `(LIVENESS_CLASS, token)` whose `token` it picked at random and
got (so no two live processes share one). Work a process claims in a row can carry its
token; another process asks `pg_locks` whether that lock is still granted: if not, the
claimer is gone (SIGKILL, a crash, a lost host: the server ends the session and its locks,
within about 25 s for a vanished host thanks to HOLDER_SETTINGS), and the work may be taken
over at once instead of after a timeout. store/postgres/idempotency.py uses it for a
`running` idempotency row whose turn died with its gateway.

If the connection drops while the process lives (the server restarted), the process takes
its token again; in between its claims look abandoned, as every turn it was running was cut
by the restart anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

import asyncpg

from sessiongate.store.postgres.locks import HOLDER_SETTINGS
from sessiongate.store.postgres.rows import CONNECT_TIMEOUT_SECONDS

log = logging.getLogger("sessiongate.store")

#: The first key of the two-int advisory locks: apart from (0x5347, 1) (migrations) and
#: (0x5347, 2) (retention) and from the per-key locks' single bigints.
LIVENESS_CLASS = 0x5350  # "SP": sessiongate process

#: True when no live process holds `token`'s liveness lock. `$1` is the token (bigint).
CLAIMER_GONE_SQL = f"""NOT EXISTS (
    SELECT 1 FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = {LIVENESS_CLASS}::bigint::oid AND l.objid = ($1)::bigint::oid
)"""


class ProcessLiveness:
    def __init__(self) -> None:
        #: This process's token while started (1 … 2^31 - 1); 0 before.
        self.token = 0
        self._url = ""
        self._conn: asyncpg.Connection[Any] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self, url: str) -> None:
        if self._conn is not None:
            return
        self._url, self._closed = url, False
        await self._connect()

    async def _connect(self) -> None:
        conn: asyncpg.Connection[Any] = await asyncpg.connect(
            self._url, timeout=CONNECT_TIMEOUT_SECONDS, server_settings=HOLDER_SETTINGS
        )
        try:
            token = self.token
            while True:
                if token and await conn.fetchval(
                    "SELECT pg_try_advisory_lock($1, $2)", LIVENESS_CLASS, token
                ):
                    break
                token = secrets.randbelow(2**31 - 1) + 1
        except BaseException:
            await conn.close()
            raise
        self.token = token
        conn.add_termination_listener(self._on_terminated)
        self._conn = conn

    def _on_terminated(self, _conn: object) -> None:
        self._conn = None
        if not self._closed:
            log.warning("the liveness connection to PostgreSQL dropped; reconnecting")
            self._reconnecting = asyncio.get_running_loop().create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = 0.05
        while self._conn is None and not self._closed:
            try:
                await self._connect()
            except (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError):
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)
        self._reconnecting = None

    async def stop(self) -> None:
        self._closed = True
        if self._reconnecting is not None:
            self._reconnecting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._reconnecting
            self._reconnecting = None
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.remove_termination_listener(self._on_terminated)
            with contextlib.suppress(Exception):
                await conn.close()  # the lock ends with the session
