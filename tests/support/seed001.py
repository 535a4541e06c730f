"""Seed 001's phone app, written from its protocol (../shared/seeds/001_*.txt), and a
gateway on loopback that can be stopped and started again on the same data.

The app connects to `/api/claude/ws` or `/api/codex/ws`, sends its API key as the first
text frame, reads `authenticated` and a `ready` frame, then sends
`{"content", "session_id", "device_id"}` frames and reads `message` chunks up to one
`complete` (or an `error`).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from websockets.asyncio.client import ClientConnection, connect

from tests.support.gateway import running_gateway

TIMEOUT = 5.0


@dataclass
class Turn:
    """Every frame one turn sent to a socket, up to its `complete` or `error`."""

    frames: list[dict[str, Any]]

    @property
    def end(self) -> dict[str, Any]:
        return self.frames[-1]

    @property
    def text(self) -> str:
        return "".join(f["content"] for f in self.frames if f["type"] == "message")

    @property
    def types(self) -> list[str]:
        return [f["type"] for f in self.frames]


@dataclass
class PhoneSocket:
    ws: ClientConnection
    ready: dict[str, Any]
    device_id: str
    #: The app's own per-device key, sent in every frame (None: the socket's key).
    session_id: str | None = None
    seen: list[dict[str, Any]] = field(default_factory=list)

    async def frame(self, wait: float = TIMEOUT) -> dict[str, Any]:
        raw = await asyncio.wait_for(self.ws.recv(), wait)
        assert isinstance(raw, str), raw
        frame = json.loads(raw)
        assert isinstance(frame, dict)
        self.seen.append(frame)
        return frame

    async def send(self, content: str, **fields: Any) -> None:
        body: dict[str, Any] = {"content": content, "device_id": self.device_id}
        if self.session_id is not None:
            body["session_id"] = self.session_id
        body.update(fields)
        await self.ws.send(json.dumps(body))

    async def until_end(self, wait: float = TIMEOUT) -> Turn:
        """Frames up to and including the next `complete` or `error`."""
        frames = []
        while True:
            frame = await self.frame(wait)
            frames.append(frame)
            if frame["type"] in ("complete", "error"):
                return Turn(frames)

    async def turn(self, content: str, **fields: Any) -> Turn:
        await self.send(content, **fields)
        return await self.until_end()

    async def silent(self, seconds: float = 0.3) -> bool:
        """True when nothing arrives for `seconds`."""
        try:
            frame = await asyncio.wait_for(self.ws.recv(), seconds)
        except TimeoutError:
            return True
        self.seen.append(json.loads(frame))
        return False


@asynccontextmanager
async def phone(
    ws_url: str,
    api_key: str,
    endpoint: str = "claude",
    *,
    device_id: str = "iphone-1",
    session_id: str | None = None,
    query: str = "",
) -> AsyncIterator[PhoneSocket]:
    """An authenticated socket of the app on `/api/<endpoint>/ws`."""
    async with connect(
        f"{ws_url}/api/{endpoint}/ws{query}", open_timeout=TIMEOUT, close_timeout=2, proxy=None
    ) as ws:
        await ws.send(api_key)
        assert await asyncio.wait_for(ws.recv(), TIMEOUT) == "authenticated"
        ready = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert ready["type"] == "ready", ready
        yield PhoneSocket(ws, ready, device_id, session_id)


#: Seed 001's tests start (and restart) gateways the way every transport test does.
gateway_on = running_gateway
