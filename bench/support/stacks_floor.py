"""The floor: what a Python gateway that does nothing at all costs in front of the stub.

A raw ASGI app under the same uvicorn settings as sessiongate (uvloop + httptools, access
log off, the same keep-alive and backlog), forwarding each `POST /v1/chat/completions`
body to the stub with aiohttp — the transport sessiongate's `openai` provider streams
through — and relaying the stub's bytes as they arrive. No authentication, no store, no
context, no parsing: bytes in, bytes out. Every stack's server CPU per turn and added
time to first token are reported as multiples of this one's (issue 24), since absolute
figures on a shared 2-core machine move by 2x between runs while ratios measured in one
run hold.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

import aiohttp

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


def build_floor_app(stub_url: str) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """The pass-through proxy to `stub_url` (its base, without `/v1`)."""
    clients: list[aiohttp.ClientSession] = []

    async def lifespan(receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                # No connection limit, as the SDK's own aiohttp client is configured.
                clients.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                for client in clients:
                    await client.close()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        parts: list[bytes] = []
        more = True
        while more:
            message = await receive()
            parts.append(message.get("body", b""))
            more = bool(message.get("more_body", False))
        headers = {"content-type": "application/json"}
        async with clients[0].post(
            stub_url + scope["path"], data=b"".join(parts), headers=headers
        ) as upstream:
            kind = upstream.headers.get("content-type", "application/octet-stream")
            await send(
                {
                    "type": "http.response.start",
                    "status": upstream.status,
                    "headers": [(b"content-type", kind.encode())],
                }
            )
            async for chunk in upstream.content.iter_any():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app
