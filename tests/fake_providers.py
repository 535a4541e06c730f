"""Local fake model servers speaking the OpenAI and Anthropic streaming wire formats.

A raw asyncio HTTP/1.1 server on 127.0.0.1 with an ephemeral port, one request per
connection, SSE bodies sent with chunked transfer encoding. Raw rather than a framework so
a test can make it misbehave the way real servers do: hang before the first byte, cut the
connection mid-body, send a data line that is not JSON.

    async with FakeServer(Reply(status=500), Reply(events=openai_events(["Hi"]))) as server:
        ...  # the first request gets the 500, every later one the stream
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http import HTTPStatus
from pathlib import Path
from types import TracebackType
from typing import Any

from sessiongate.config import Settings
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.errors import ModelError
from sessiongate.models.base import ReplyModel, TextDelta, Usage, WireMessage
from sessiongate.service.engine import Engine, build_engine


@dataclass(frozen=True)
class Reply:
    """One scripted response."""

    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    json_body: Any = None  # a plain JSON answer, for error statuses
    events: list[str] = field(default_factory=list)  # SSE frames, already formatted
    drop: bool = False  # close the connection after the events, without ending the body
    hang: bool = False  # read the request, then never send a byte
    stall: bool = False  # send the head and the events, then go quiet with the body open
    keepalive: float = 0.0  # after the events, an SSE comment every this many seconds, forever


@dataclass(frozen=True)
class Seen:
    """One request as the server received it; `at` is `time.monotonic()`."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    at: float


class FakeServer:
    """Answers the n-th request with the n-th reply; the last reply repeats."""

    def __init__(self, *replies: Reply) -> None:
        self.replies = list(replies) or [Reply()]
        self.requests: list[Seen] = []
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()
        self._closing = asyncio.Event()
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> FakeServer:
        self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._closing.set()
        assert self._server is not None
        self._server.close()
        for writer in list(self._writers):
            writer.close()
        await self._server.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        try:
            seen = await _read_request(reader)
            if seen is None:
                return
            self.requests.append(seen)
            reply = self.replies[min(len(self.requests), len(self.replies)) - 1]
            await _respond(writer, reply, self._closing)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client gave up first (a timeout test): nothing to answer
        finally:
            self._writers.discard(writer)
            with contextlib.suppress(ConnectionError):
                writer.close()


async def _read_request(reader: asyncio.StreamReader) -> Seen | None:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) < 2:
        return None
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    raw = await reader.readexactly(int(headers.get("content-length", "0")))
    body = json.loads(raw) if raw else None
    return Seen(parts[0], parts[1], headers, body, time.monotonic())


async def _respond(writer: asyncio.StreamWriter, reply: Reply, closing: asyncio.Event) -> None:
    if reply.hang:
        await closing.wait()
        return
    try:
        phrase = HTTPStatus(reply.status).phrase
    except ValueError:
        phrase = "Unknown"  # 529 has no standard phrase
    head = [f"HTTP/1.1 {reply.status} {phrase}", "connection: close"]
    head += [f"{name}: {value}" for name, value in reply.headers.items()]
    if reply.json_body is not None or reply.status != 200:
        body = json.dumps(reply.json_body).encode()
        head += ["content-type: application/json", f"content-length: {len(body)}"]
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        await writer.drain()
        return
    head += ["content-type: text/event-stream", "transfer-encoding: chunked"]
    writer.write(("\r\n".join(head) + "\r\n\r\n").encode())
    for frame in reply.events:
        data = frame.encode()
        writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        await writer.drain()
        await asyncio.sleep(0.005)  # separate packets, as a real token stream would be
    while reply.keepalive and not closing.is_set():
        comment = b": keep-alive\n\n"
        writer.write(f"{len(comment):x}\r\n".encode() + comment + b"\r\n")
        await writer.drain()
        await asyncio.sleep(reply.keepalive)
    if reply.stall:
        await closing.wait()
        return
    if not reply.drop:
        writer.write(b"0\r\n\r\n")  # the end of a chunked body; a drop never sends it
    await writer.drain()


# -- wire formats ---------------------------------------------------------------------------


def sse(data: object, event: str | None = None) -> str:
    text = data if isinstance(data, str) else json.dumps(data)
    return (f"event: {event}\n" if event else "") + f"data: {text}\n\n"


def openai_chunk(content: str | None = None, finish: str | None = None) -> dict[str, Any]:
    delta: dict[str, Any] = {} if content is None else {"content": content}
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def openai_events(
    tokens: list[str],
    *,
    usage: tuple[int, int] | None = (11, 7),
    finish: bool = True,
    done: bool = True,
) -> list[str]:
    """role chunk, one chunk per token, then (with `finish`) the finish chunk and the usage
    chunk, then (with `done`) `[DONE]`. `finish=False, done=False` is a body that just ends;
    `finish=False` alone a server that sends `[DONE]` without the model's finish_reason."""
    first = openai_chunk()
    first["choices"][0]["delta"] = {"role": "assistant", "content": ""}
    frames = [sse(first)] + [sse(openai_chunk(t)) for t in tokens]
    if finish:
        frames.append(sse(openai_chunk(finish="stop")))
        if usage is not None:
            chunk = openai_chunk()
            chunk["choices"] = []
            chunk["usage"] = {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            }
            frames.append(sse(chunk))
    if done:
        frames.append(sse("[DONE]"))
    return frames


def openai_error(message: str, kind: str = "server_error") -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "code": None}}


def anthropic_events(
    tokens: list[str],
    *,
    input_tokens: int = 13,
    output_tokens: int = 5,
    stop_reason: bool = True,
    message_stop: bool = True,
) -> list[str]:
    """message_start … content_block_delta (text_delta) … then (with `stop_reason`)
    content_block_stop and the message_delta carrying the stop reason, then (with
    `message_stop`) message_stop. Both off is a body that just ends."""
    message: dict[str, Any] = {
        "id": "msg_fake",
        "type": "message",
        "role": "assistant",
        "model": "fake-claude",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": {"input_tokens": input_tokens, "output_tokens": 1},
    }
    frames = [
        sse({"type": "message_start", "message": message}, "message_start"),
        sse(
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
            "content_block_start",
        ),
        sse({"type": "ping"}, "ping"),
    ]
    for token in tokens:
        delta = {"type": "text_delta", "text": token}
        frames.append(
            sse({"type": "content_block_delta", "index": 0, "delta": delta}, "content_block_delta")
        )
    if stop_reason:
        frames += [
            sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
                "message_delta",
            ),
        ]
    if message_stop:
        frames.append(sse({"type": "message_stop"}, "message_stop"))
    return frames


def anthropic_error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "error": {"type": kind, "message": message}}


# -- consuming a model ----------------------------------------------------------------------


@dataclass
class Outcome:
    """What one `stream()` produced: the text, the usage, and the error that ended it."""

    text: str = ""
    tokens: int = 0
    usage: Usage | None = None
    error: ModelError | None = None
    seconds: float = 0.0


async def consume(model: ReplyModel, messages: Sequence[WireMessage]) -> Outcome:
    outcome = Outcome()
    started = time.monotonic()
    try:
        async for chunk in model.stream(messages):
            if isinstance(chunk, TextDelta):
                outcome.text += chunk.text
                outcome.tokens += 1
            else:
                outcome.usage = chunk
    except ModelError as exc:
        outcome.error = exc
    outcome.seconds = time.monotonic() - started
    return outcome


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def engine_for(tmp_path: Path, model: dict[str, Any]) -> Engine:
    """An engine whose main agent uses `model`, with `offline` as its fallback."""
    return build_engine(
        Settings(
            data_dir=tmp_path,
            models={"m": model},
            agents={"defaults": {"model": "m", "fallback_models": ["offline"]}},
            lifecycle={"timezone": "UTC"},
        )
    )


async def assistant_message(engine: Engine, key: str = "chat:alice") -> tuple[str, dict[str, Any]]:
    """The one assistant message of the key's latest segment: content and metadata."""
    segment = await engine.store.latest_segment(KeyRef("alice", key))
    messages = await engine.store.list_messages(segment.session_id)
    (reply,) = [m for m in messages if m.role is Role.ASSISTANT]
    return reply.content, reply.metadata
