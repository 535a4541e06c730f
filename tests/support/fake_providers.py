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
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelOptions,
    ReplyModel,
    TextDelta,
    ToolCallChunk,
    Usage,
    WireMessage,
)
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
    raw: bytes = b""  # the body's bytes as they came


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
    return Seen(parts[0], parts[1], headers, body, time.monotonic(), raw)


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
    return frames + openai_ending("stop" if finish else None, usage, done)


def openai_ending(finish: str | None, usage: tuple[int, int] | None, done: bool) -> list[str]:
    """The finish chunk and the usage chunk (without `finish`: neither), then `[DONE]`."""
    frames = []
    if finish is not None:
        frames.append(sse(openai_chunk(finish=finish)))
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
            elif isinstance(chunk, Usage):  # no tools offered, so no tool call chunks
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


# -- tool calls -----------------------------------------------------------------------------


@dataclass(frozen=True)
class FakeCall:
    """One tool call a fake server streams: its arguments sent in `pieces`."""

    call_id: str
    name: str
    pieces: tuple[str, ...]

    @property
    def arguments(self) -> str:
        return "".join(self.pieces)


def split_arguments(call_id: str, name: str, arguments: str, size: int = 3) -> FakeCall:
    """A call whose arguments arrive `size` characters at a time."""
    pieces = tuple(arguments[i : i + size] for i in range(0, len(arguments), size))
    return FakeCall(call_id, name, pieces)


def openai_tool_chunk(pieces: list[dict[str, Any]], finish: str | None = None) -> dict[str, Any]:
    """A chat-completions chunk whose delta carries `tool_calls` pieces as they are."""
    chunk = openai_chunk(finish=finish)
    chunk["choices"][0]["delta"] = {"tool_calls": pieces}
    return chunk


def openai_tool_pieces(calls: Sequence[FakeCall], *, interleave: bool = False) -> list[str]:
    """SSE frames of `delta.tool_calls` pieces: each call's first piece has its index, id,
    name and no arguments, then one piece per argument fragment. `interleave` sends the
    calls' fragments round-robin, as parallel calls arrive from a real server."""
    per_call: list[list[dict[str, Any]]] = []
    for index, call in enumerate(calls):
        first = {
            "index": index,
            "id": call.call_id,
            "type": "function",
            "function": {"name": call.name, "arguments": ""},
        }
        rest = [{"index": index, "function": {"arguments": p}} for p in call.pieces]
        per_call.append([first, *rest])
    if interleave:
        longest = max((len(p) for p in per_call), default=0)
        order = [p[i] for i in range(longest) for p in per_call if i < len(p)]
    else:
        order = [piece for pieces in per_call for piece in pieces]
    return [sse(openai_tool_chunk([piece])) for piece in order]


def openai_tool_events(
    tokens: list[str],
    calls: Sequence[FakeCall],
    *,
    interleave: bool = False,
    finish: str | None = "tool_calls",
    done: bool = True,
    usage: tuple[int, int] | None = (11, 7),
) -> list[str]:
    """`openai_events` with tool-call pieces after the text; `finish=None` leaves out the
    finish chunk and the usage chunk (with `done=False` the body just ends)."""
    frames = openai_events(tokens, finish=False, done=False)
    frames += openai_tool_pieces(calls, interleave=interleave)
    return frames + openai_ending(finish, usage, done)


def anthropic_tool_events(
    tokens: list[str],
    calls: Sequence[FakeCall],
    *,
    input_tokens: int = 13,
    output_tokens: int = 5,
    close_last: bool = True,
    stop_reason: bool = True,
    message_stop: bool = True,
) -> list[str]:
    """`anthropic_events` with a text block (index 0, when there are tokens) and then one
    `tool_use` block per call, its input as `input_json_delta` pieces. `close_last=False`
    leaves the last call's block without its content_block_stop; `stop_reason=False` ends
    before the message_delta."""
    frames = anthropic_events(
        tokens, input_tokens=input_tokens, stop_reason=False, message_stop=False
    )
    if tokens:
        frames.append(sse({"type": "content_block_stop", "index": 0}, "content_block_stop"))
    first = 1 if tokens else 0
    if not tokens:  # anthropic_events opened an empty text block 0: drop it
        frames = [f for f in frames if '"content_block_start"' not in f]
    for offset, call in enumerate(calls):
        index = first + offset
        block = {"type": "tool_use", "id": call.call_id, "name": call.name, "input": {}}
        frames.append(
            sse(
                {"type": "content_block_start", "index": index, "content_block": block},
                "content_block_start",
            )
        )
        for piece in call.pieces:
            delta = {"type": "input_json_delta", "partial_json": piece}
            frames.append(
                sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            )
        if close_last or offset < len(calls) - 1:
            frames.append(sse({"type": "content_block_stop", "index": index}, "content_block_stop"))
    if stop_reason:
        frames.append(
            sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": output_tokens},
                },
                "message_delta",
            )
        )
    if message_stop:
        frames.append(sse({"type": "message_stop"}, "message_stop"))
    return frames


@dataclass
class ToolOutcome(Outcome):
    """An `Outcome` that also keeps the tool calls, and the order chunks came in
    ("text", "call", "usage")."""

    calls: list[ToolCallChunk] = field(default_factory=list)
    order: list[str] = field(default_factory=list)


async def consume_with(
    model: ReplyModel, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
) -> ToolOutcome:
    """`consume` for a request with options, keeping tool calls apart from the usage."""
    outcome = ToolOutcome()
    started = time.monotonic()
    try:
        async for chunk in model.stream(messages, options):
            if isinstance(chunk, TextDelta):
                outcome.text += chunk.text
                outcome.tokens += 1
                outcome.order.append("text")
            elif isinstance(chunk, ToolCallChunk):
                outcome.calls.append(chunk)
                outcome.order.append("call")
            elif isinstance(chunk, Usage):
                outcome.usage = chunk
                outcome.order.append("usage")
    except ModelError as exc:
        outcome.error = exc
    outcome.seconds = time.monotonic() - started
    return outcome
