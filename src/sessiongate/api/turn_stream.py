"""The response that streams one turn's frames (REST SSE, the OpenAI routes, LifeHub).

Starlette's `StreamingResponse`, under a server speaking ASGI 2.3 (uvicorn), runs every
response in an anyio task group beside a task that waits for the client to disconnect,
so it can cancel the stream. A turn's stream does not need that: the turn runs to its
end whether anyone listens or not (the transport only relays its events, DESIGN §3), and
the stream ends with the turn (bounded by the agent's `turn_timeout`). After a
disconnect the server drops what is still written. So the frames are written directly:
a task group, a second task and a cancel scope less per streamed turn, measured at ~7 %
of the gateway's CPU per turn (bench/gateway_load.py --profile).
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class TurnStream(StreamingResponse):
    """A `StreamingResponse` for a stream that ends with its turn (see the module)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await super().__call__(scope, receive, send)
            return
        try:
            await self.stream_response(send)
        except OSError as exc:  # a server that reports the gone client by raising
            raise ClientDisconnect() from exc
        if self.background is not None:
            await self.background()
