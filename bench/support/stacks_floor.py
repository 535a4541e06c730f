"""The floor: what a Python gateway that does nothing at all costs in front of the stub.

A raw ASGI app under the same uvicorn settings as sessiongate (uvloop + httptools, access
log off, the same keep-alive and backlog), forwarding each `POST /v1/chat/completions`
body to the stub with aiohttp — the transport sessiongate's `openai` provider streams
through — and relaying the stub's bytes as they arrive. No authentication, no store, no
context, no parsing: bytes in, bytes out. Every stack's server CPU per turn and added
time to first token are reported as multiples of this one's (issue 24), since absolute
figures on a shared 2-core machine move by 2x between runs while ratios measured in one
run hold.

The durable floor (`durable=` a SQLite file) is the same proxy doing the least that a
session layer's contract asks (DESIGN §2: no message loss on a crash): it parses the
body, stores the question and commits before the model is called, reads the streamed
answer's text and stores it with a second commit. stdlib sqlite3 in WAL mode with
`synchronous = NORMAL` (the gateway's own settings), inline on the event loop, one
connection, no schema beyond one table: the cheapest such a gateway can be in Python.
It says how much of the distance to the floor any durable gateway must keep.

The FastAPI floor (`build_fastapi_floor_app`) is the bare proxy written as a FastAPI
user writes an endpoint: the body a pydantic model, a header and a query parameter, a
dependency reading the `Authorization` header, `StreamingResponse` for the relay. No
store, no context. It says what the framework alone costs per request.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from typing import Annotated, Any

import aiohttp
import orjson
from fastapi import Depends, FastAPI, Header, Query
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class Transcript:
    """The durable floor's store: one table, two commits a turn."""

    def __init__(self, path: str) -> None:
        self.db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode = WAL")
        self.db.execute("PRAGMA synchronous = NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS messages"
            " (id INTEGER PRIMARY KEY, role TEXT NOT NULL, content TEXT NOT NULL)"
        )

    def keep(self, role: str, content: str) -> None:
        self.db.execute("INSERT INTO messages (role, content) VALUES (?, ?)", (role, content))


def question_of(body: bytes) -> str:
    messages = orjson.loads(body).get("messages") or [{}]
    return str(messages[-1].get("content", ""))


def answer_of(stream: bytes) -> str:
    """The text of a chat-completions SSE stream (its `delta.content` pieces)."""
    parts: list[str] = []
    for line in stream.split(b"\n"):
        if line.startswith(b"data: {"):
            for choice in orjson.loads(line[6:]).get("choices") or ():
                parts.append((choice.get("delta") or {}).get("content") or "")
    return "".join(parts)


def build_floor_app(
    stub_url: str, durable: str | None = None
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    """The pass-through proxy to `stub_url` (its base, without `/v1`); with `durable`,
    the durable floor storing each question and answer in that SQLite file."""
    clients: list[aiohttp.ClientSession] = []
    transcript = Transcript(durable) if durable is not None else None

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
        body = b"".join(parts)
        if transcript is not None:  # stored before the model sees it
            transcript.keep("user", question_of(body))
        answer: list[bytes] = []
        headers = {"content-type": "application/json"}
        url = stub_url + scope["path"]
        async with clients[0].post(url, data=body, headers=headers) as upstream:
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
                if transcript is not None:
                    answer.append(chunk)
        if transcript is not None:  # stored before the client hears the stream end
            transcript.keep("assistant", answer_of(b"".join(answer)))
        await send({"type": "http.response.body", "body": b"", "more_body": False})

    return app


class ChatRequest(BaseModel):
    """The FastAPI floor's body: what it must read of a chat completions request."""

    model_config = ConfigDict(extra="allow")

    model: str
    messages: list[dict[str, Any]]
    stream: bool = False


async def caller(authorization: Annotated[str | None, Header()] = None) -> str:
    return authorization or ""


def build_fastapi_floor_app(stub_url: str) -> FastAPI:
    """The pass-through proxy as a FastAPI endpoint (see the module)."""
    clients: list[aiohttp.ClientSession] = []

    @asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        clients.append(aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)))
        yield
        await clients[0].close()

    app = FastAPI(lifespan=lifespan)

    @app.post("/v1/chat/completions")
    async def chat(
        body: ChatRequest,
        who: Annotated[str, Depends(caller)],
        x_session_key: Annotated[str | None, Header(max_length=200)] = None,
        owner: Annotated[str | None, Query(max_length=64)] = None,
    ) -> StreamingResponse:
        upstream = await clients[0].post(
            stub_url + "/v1/chat/completions",
            data=orjson.dumps(body.model_dump()),
            headers={"content-type": "application/json"},
        )

        async def relay() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.content.iter_any():
                    yield chunk
            finally:
                upstream.release()

        kind = upstream.headers.get("content-type", "application/octet-stream")
        return StreamingResponse(relay(), status_code=upstream.status, media_type=kind)

    return app
