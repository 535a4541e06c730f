"""The response that streams one turn's frames (REST SSE, the OpenAI routes, LifeHub).

Starlette's `StreamingResponse`, under a server speaking ASGI 2.3 (uvicorn), runs every
response in an anyio task group beside a task that waits for the client to disconnect,
and cancels the stream when it does. The cancelling is needed: a stream a gone client
left running would hold its request open until its turn ends, and a server shutting
down waits for open requests before the gateway can mark the turn's partial reply
`interrupted`. The task group is not: its cancel scopes were ~7 % of the gateway's CPU
per turn (bench/gateway_load.py --profile). So the frames are written from the request's
own task, and one plain asyncio task waits for the disconnect and cancels that task.
The turn itself runs on either way (the transport only relays its events, DESIGN §3).
"""

from __future__ import annotations

import asyncio

from starlette.requests import ClientDisconnect
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send


class TurnStream(StreamingResponse):
    """A `StreamingResponse` for a stream that ends with its turn (see the module)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        current = asyncio.current_task()
        if scope["type"] != "http" or current is None:
            await super().__call__(scope, receive, send)
            return
        streaming, gone = True, False

        async def watch() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass  # a client sends no more body after its request; read and drop
            if streaming:  # after the last frame, a disconnect is the normal end
                gone = True
                current.cancel()

        watcher = asyncio.create_task(watch())
        try:
            await self.stream_response(send)
        except asyncio.CancelledError:
            if not gone:
                raise
            current.uncancel()  # our own cancel: the client went away, nothing to send
            return
        except OSError as exc:  # a server that reports the gone client by raising
            raise ClientDisconnect() from exc
        finally:
            streaming = False
            watcher.cancel()
        if self.background is not None:
            await self.background()
