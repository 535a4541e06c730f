"""The stub model of bench/scale_soak.py: an OpenAI-compatible streaming
`POST /v1/chat/completions` (support/stub.py's server) whose reply names the message it
answers, `ack: <the last user message>`, so the soak can check in the stored history that
every answer sits right after its own question.

The reply streams in three pieces `interval` apart, so a turn lasts long enough (about
10 ms at the defaults) for turns on one key from several gateways to overlap.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

from support.stub import STUB_MODEL, StubModel, _raw_chunk, _sse_chunk, serve_handler


def reply_to(content: str) -> str:
    return f"ack: {content}"


class EchoStub(StubModel):
    def __init__(self, interval: float) -> None:
        super().__init__(tokens=1, ttft=0.0, interval=interval)

    def _chunk(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return _sse_chunk({**self.base, "choices": [choice]})

    async def completions(self, request: dict[str, Any], writer: asyncio.StreamWriter) -> None:
        self.requests += 1
        messages = request.get("messages", [])
        last = str(messages[-1].get("content", "")) if messages else ""
        reply = reply_to(last)
        prompt_chars = sum(len(str(m.get("content", ""))) for m in messages)
        if not request.get("stream"):
            body = {
                "id": "chatcmpl-soak",
                "object": "chat.completion",
                "created": 0,
                "model": STUB_MODEL,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": reply},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": prompt_chars // 4, "completion_tokens": 3},
            }
            self.json_response(writer, body)
            return
        third = max(1, len(reply) // 3)
        pieces = [reply[:third], reply[third : 2 * third], reply[2 * third :]]
        writer.write(self.HEAD)
        for n, piece in enumerate(pieces):
            if n and self.interval > 0:
                await asyncio.sleep(self.interval)
            delta = {"role": "assistant", "content": piece} if n == 0 else {"content": piece}
            writer.write(self._chunk(delta))
        tail = self._chunk({}, "stop")
        if (request.get("stream_options") or {}).get("include_usage"):
            tail += self.usage_chunk(prompt_chars)
        writer.write(tail + _raw_chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()


def serve_soak_stub(args: argparse.Namespace) -> None:
    stub = EchoStub(args.stub_interval_ms / 1000)
    serve_handler(stub.handle, args.ready_file)
