"""The streamed response of a turn: its frames written as they come, in the request's own
task.

Starlette's `StreamingResponse` runs a second task per response that waits for the
client to leave, under a task group, unless the server speaks ASGI spec 2.4 — uvicorn
announces 2.3. Setting that up cost about 0.3 ms of the event loop per turn, before the
first frame (bench/gateway_load.py, c=1). A turn's stream does not need the watcher: the
turn runs to its end whether or not anyone listens (its own task, bounded by
`agents.*.turn_timeout`), uvicorn drops what is written to a closed connection, and the
frames then stop when the turn does — the behaviour Starlette itself chooses under spec
2.4. Streams that may wait on something unbounded keep `StreamingResponse`.
"""

from __future__ import annotations

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class TurnStreamResponse(StreamingResponse):
    """A `StreamingResponse` for a stream that ends on its own: no disconnect watcher."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.stream_response(send)
        except OSError:  # a server that raises on a closed connection
            raise ClientDisconnect() from None
        if self.background is not None:
            await self.background()
