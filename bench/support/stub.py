"""The stub model: the local OpenAI-compatible upstream every stack in gateway_load.py talks to.

`POST /v1/chat/completions` on a minimal HTTP/1.1 server (raw asyncio streams on uvloop).
`stream: true` is answered with `chat.completion.chunk` SSE events, a finish chunk, a usage
chunk when `stream_options.include_usage` is set, and `data: [DONE]`. How the reply's tokens
are spaced is a mode, switched between phases through `POST /_mode`:

* `paced`: the first token after `ttft`, then one every `interval` (a 200 ms reply at the
  defaults): what a streaming model looks like;
* `instant`: every token in one write: the upstream costs nothing, so a stack's turns/s is
  its own capacity;
* `split`: the first token after `ttft`, the rest in one write `interval` later: the first
  token travels alone as in `paced` (time to first token means the same), while a turn
  is short (20 ms at the defaults) and costs the stack about what an `instant` one does.

It runs as its own process: `gateway_load.py --role stub` calls `serve_stub`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Awaitable, Callable
from typing import Any

from support.common import run_async
from support.procs import listening_socket, write_ready

STUB_MODEL = "stub-model"
MODES = ("paced", "instant", "split")


def stub_tokens(count: int) -> list[str]:
    return [f"w{i} " for i in range(count)]


def _raw_chunk(data: bytes) -> bytes:
    """One HTTP/1.1 chunk."""
    return f"{len(data):x}\r\n".encode() + data + b"\r\n"


def _sse_chunk(payload: dict[str, Any]) -> bytes:
    """One SSE event as one HTTP/1.1 chunk."""
    return _raw_chunk(b"data: " + json.dumps(payload, separators=(",", ":")).encode() + b"\n\n")


class StubModel:
    """OpenAI-compatible streaming chat completions over a minimal HTTP/1.1 server."""

    HEAD = (
        b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
        b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
    )

    def __init__(self, tokens: int, ttft: float, interval: float) -> None:
        self.mode = "paced"
        self.ttft = ttft
        self.interval = interval
        self.requests = 0
        self.connections = 0  # accepted: shows whether a client reuses its connections
        self.texts = stub_tokens(tokens)
        self.base: dict[str, Any] = {
            "id": "chatcmpl-stub",
            "object": "chat.completion.chunk",
            "created": 0,
            "model": STUB_MODEL,
        }
        self.chunks = [
            _sse_chunk(
                {
                    **self.base,
                    "choices": [
                        {
                            "index": 0,
                            "delta": {"role": "assistant", "content": text}
                            if i == 0
                            else {"content": text},
                            "finish_reason": None,
                        }
                    ],
                }
            )
            for i, text in enumerate(self.texts)
        ]
        self.finish = _sse_chunk(
            {**self.base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
        )
        self.done = _raw_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n"

    def usage_chunk(self, prompt_chars: int) -> bytes:
        prompt = max(1, prompt_chars // 4)
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": len(self.texts),
            "total_tokens": prompt + len(self.texts),
        }
        return _sse_chunk({**self.base, "choices": [], "usage": usage})

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    return
                request_line, _, header_block = head.partition(b"\r\n")
                method, path, _ = request_line.split(b" ", 2)
                length = 0
                for line in header_block.split(b"\r\n"):
                    name, _, value = line.partition(b":")
                    if name.strip().lower() == b"content-length":
                        length = int(value)
                body = await reader.readexactly(length) if length else b""
                await self.route(method, path, body, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            writer.close()

    async def route(
        self, method: bytes, path: bytes, body: bytes, writer: asyncio.StreamWriter
    ) -> None:
        if method == b"POST" and path == b"/v1/chat/completions":
            await self.completions(json.loads(body), writer)
        elif method == b"POST" and path == b"/_mode":
            mode = json.loads(body)["mode"]
            if mode not in MODES:
                self.json_response(writer, {"error": mode}, status=b"400 Bad Request")
                return
            self.mode = mode
            self.json_response(writer, {"mode": self.mode})
        elif path == b"/_stats":
            stats = {"requests": self.requests, "connections": self.connections}
            self.json_response(writer, {**stats, "mode": self.mode})
        elif path == b"/health":
            self.json_response(writer, {"status": "ok"})
        else:
            self.json_response(writer, {"error": {"message": "not found"}}, status=b"404 Not Found")

    @staticmethod
    def json_response(
        writer: asyncio.StreamWriter, payload: dict[str, Any], status: bytes = b"200 OK"
    ) -> None:
        data = json.dumps(payload).encode()
        writer.write(
            b"HTTP/1.1 " + status + b"\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(data)).encode() + b"\r\n\r\n" + data
        )

    def whole_reply(self, prompt_chars: int) -> dict[str, Any]:
        return {
            "id": "chatcmpl-stub",
            "object": "chat.completion",
            "created": 0,
            "model": STUB_MODEL,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": "".join(self.texts)},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": len(self.texts)},
        }

    async def completions(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        prompt_chars = sum(len(str(m.get("content", ""))) for m in request.get("messages", []))
        if not request.get("stream"):
            self.json_response(writer, self.whole_reply(prompt_chars))
            return
        options = request.get("stream_options") or {}
        tail = self.finish
        if options.get("include_usage"):
            tail += self.usage_chunk(prompt_chars)
        tail += self.done
        if self.mode == "instant":
            writer.write(self.HEAD + b"".join(self.chunks) + tail)
            await writer.drain()
            return
        writer.write(self.HEAD)
        if self.ttft > 0:
            await asyncio.sleep(self.ttft)
        if self.mode == "split":
            writer.write(self.chunks[0])
            await asyncio.sleep(self.interval)
            writer.write(b"".join(self.chunks[1:]) + tail)
            await writer.drain()
            return
        for i, chunk in enumerate(self.chunks):
            if i and self.interval > 0:
                await asyncio.sleep(self.interval)
            writer.write(chunk)
        writer.write(tail)
        await writer.drain()


def serve_stub(args: argparse.Namespace) -> None:
    stub = StubModel(args.tokens, args.stub_ttft_ms / 1000, args.stub_interval_ms / 1000)

    serve_handler(stub.handle, args.ready_file)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def serve_handler(handle: Handler, ready_file: str) -> None:
    """Serve `handle` on a fresh loopback port until SIGTERM or SIGINT; the port goes to
    `ready_file` once it listens."""

    async def main() -> None:
        sock = listening_socket()
        server = await asyncio.start_server(handle, sock=sock, backlog=2048)
        write_ready(ready_file, {"port": sock.getsockname()[1]})
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        async with server:
            await stop.wait()

    run_async(main())
