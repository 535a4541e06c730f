"""One WebSocket's outbound side: writing frames (one at a time), the keys it watches, and
the other devices' frames it receives through the broadcast (api/ws/broadcast.py); and
what every socket of one app shares (`SocketServices`, set up by `install`).

A slow client never holds up a turn: other devices' frames wait in a bounded queue that a
task of its own writes out; past the bound they are dropped and the client told once.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import orjson
from fastapi import FastAPI, WebSocket, WebSocketDisconnect

from sessiongate.api.auth import caller_for
from sessiongate.api.ws.broadcast import TurnBroadcast
from sessiongate.api.ws.broadcast_frames import Frame
from sessiongate.api.ws.render import error_frame
from sessiongate.core.users import User
from sessiongate.errors import SessionGateError
from sessiongate.service.broadcast_data import StoredTurns, build_fanout
from sessiongate.service.engine import Engine
from sessiongate.service.seed_endpoints import SeedEndpoints, build_seed_endpoints

#: Keys one socket watches at most: of its `ready` key and the keys its frames used, the
#: ones used most recently.
MAX_WATCHED = 16
#: Other devices' frames waiting to be written to one socket; past this they are dropped
#: and the socket is told once (`broadcast_overflow`).
MAX_PENDING_BROADCAST = 4096
#: What the client going away looks like when a frame is written to it.
GONE = (WebSocketDisconnect, RuntimeError, OSError)


class SocketLink:
    """Sending to one client, and what it watches; `ChatSocket` adds the protocol."""

    def __init__(self, ws: WebSocket, hub: TurnBroadcast) -> None:
        self.ws = ws
        self.hub = hub
        self._send_lock = asyncio.Lock()
        #: Keys (stored form) whose frames this socket receives, oldest first.
        self._watched: dict[str, None] = {}
        #: Other devices' frames, written by their own task so a slow socket never holds
        #: up the turn that produced them.
        self._pending: asyncio.Queue[Frame] = asyncio.Queue(MAX_PENDING_BROADCAST)
        self._overflowed = False
        #: The client went away: a turn still running is relayed to the others regardless.
        self._gone = False
        #: Turns this socket follows by `resume` (once per resume, so a few at most): their
        #: broadcast copies are not sent too; the resumed frames carry them to their end.
        self._resuming: list[str] = []

    async def _watch(self, user: User, key: str) -> None:
        """Receive the turns other sockets and requests run on `key` from now on."""
        try:
            stored = caller_for(user).key(key).storage_id
        except SessionGateError:
            return  # a bad key watches nothing; its turns are refused anyway
        if stored in self._watched:
            self._watched[stored] = self._watched.pop(stored)  # now the newest
            return
        self._watched[stored] = None
        if len(self._watched) > MAX_WATCHED:
            oldest = next(iter(self._watched))  # the key this socket used longest ago
            del self._watched[oldest]
            self.hub.unwatch(self, oldest)
        await self.hub.watch(self, stored)

    def deliver(self, frame: Frame) -> None:
        """Another device's frame for this socket (api/ws_broadcast.Watcher)."""
        if self._gone or (self._resuming and frame.get("turn_id") in self._resuming):
            return
        try:
            self._pending.put_nowait(frame)
        except asyncio.QueueFull:
            self._overflowed = True

    async def _write_broadcasts(self) -> None:
        while True:
            frame = await self._pending.get()
            try:
                await self._send(frame)
                if self._overflowed and self._pending.empty():
                    self._overflowed = False
                    await self._error(
                        "broadcast_overflow",
                        "this connection fell behind other devices' turns and some of their"
                        " frames were dropped; reconnect to reload the history",
                    )
            except GONE:
                self._gone = True
                return

    async def _send(self, frame: dict[str, Any]) -> None:
        async with self._send_lock:  # the reader's error frames and a turn's frames
            await self.ws.send_text(orjson.dumps(frame).decode())

    async def _error(
        self,
        code: str,
        message: str,
        frame_number: int | None = None,
        retry_after: int | None = None,
    ) -> None:
        with contextlib.suppress(RuntimeError):
            await self._send(error_frame(code, message, frame_number, retry_after))


class SocketServices:
    """What the WebSocket endpoints share in one app: the broadcast and seed 001's
    endpoint rules. `install` puts them on `app.state`; the lifespan closes them."""

    def __init__(self, broadcast: TurnBroadcast, seed: SeedEndpoints) -> None:
        self.broadcast = broadcast
        self.seed = seed

    async def aclose(self) -> None:
        await self.broadcast.aclose()
        await self.seed.drain()


def install(app: FastAPI, engine: Engine) -> SocketServices:
    broadcast = TurnBroadcast(StoredTurns(engine.store), build_fanout(engine.store))
    services = SocketServices(broadcast, build_seed_endpoints(engine.store, engine.sessions.clock))
    # Turns no socket started (REST, OpenAI-compatible, …) are broadcast when they end.
    engine.turns.after_turn(services.broadcast.finished)
    engine.sessions.on_erase(services.seed.forget)
    # /api/health's counts are current once a turn ends (seed 001's app reads them then).
    engine.sessions.on_keys_changed(services.seed.invalidate)
    app.state.sockets = services
    return services
