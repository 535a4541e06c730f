"""Reply-model adapters for the sessiongate gateway that live in the bench, not in
sessiongate: the fallback when the `openai` provider is unusable (`httpx`), and two
diagnostics that isolate the gateway's own cost (`--gateway-model raw|inprocess`).

Each has the `ReplyModel` shape the engine accepts: a `name` and an async `stream(messages)`
that yields `TextDelta`s and then one `Usage`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from support.procs import HOST
from support.stub import stub_tokens


class HttpxStubModel:
    """The fallback reply model: streams an OpenAI-compatible server with plain httpx."""

    def __init__(self, name: str, base_url: str, model: str) -> None:
        import httpx

        self.name = name
        self.model = model
        self._url = base_url.rstrip("/") + "/chat/completions"
        self._client = httpx.AsyncClient(
            timeout=httpx.Timeout(120, connect=10),
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=200),
        )

    async def stream(self, messages: Sequence[Any]) -> AsyncIterator[Any]:
        from sessiongate.models.base import TextDelta, Usage

        wire = [{"role": m["role"], "content": m["content"]} for m in messages]
        body = {
            "model": self.model,
            "messages": wire,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        usage = Usage()
        async with self._client.stream("POST", self._url, json=body) as response:
            response.raise_for_status()
            async for line in response.aiter_lines():
                if not line.startswith("data: "):
                    continue
                data = line[6:]
                if data == "[DONE]":
                    continue  # read on to the end of the body, so the connection is reused
                chunk = json.loads(data)
                for choice in chunk.get("choices") or []:
                    text = (choice.get("delta") or {}).get("content")
                    if text:
                        yield TextDelta(text)
                raw = chunk.get("usage")
                if raw:
                    usage = Usage(raw["prompt_tokens"], raw["completion_tokens"])
        yield usage


class RawHttpStubModel:
    """Diagnostic only (`--gateway-model raw`): the same upstream call over bare asyncio
    streams (HTTP/1.1 keep-alive, chunked SSE, a free list of connections), to show what a
    lean upstream client costs next to httpx's pool at 50 concurrent streams."""

    def __init__(self, name: str, base_url: str, model: str) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(base_url)
        self.name = name
        self.model = model
        self._host = parts.hostname or HOST
        self._port = parts.port or 80
        self._path = parts.path.rstrip("/") + "/chat/completions"
        self._idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []

    async def stream(self, messages: Sequence[Any]) -> AsyncIterator[Any]:
        from sessiongate.models.base import TextDelta, Usage

        body = json.dumps(
            {
                "model": self.model,
                "messages": [{"role": m["role"], "content": m["content"]} for m in messages],
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        ).encode()
        if self._idle:
            reader, writer = self._idle.pop()
        else:
            reader, writer = await asyncio.open_connection(self._host, self._port)
        reusable = False
        try:
            writer.write(
                f"POST {self._path} HTTP/1.1\r\nhost: {self._host}:{self._port}\r\n"
                f"content-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n".encode()
                + body
            )
            head = await reader.readuntil(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"upstream answered {head[:40]!r}")
            usage = Usage()
            pending = b""
            while True:
                size = int((await reader.readuntil(b"\r\n")).strip(), 16)
                if size == 0:
                    await reader.readuntil(b"\r\n")
                    break
                pending += (await reader.readexactly(size + 2))[:-2]
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    data = event.removeprefix(b"data: ")
                    if data == b"[DONE]":
                        continue
                    chunk = json.loads(data)
                    for choice in chunk.get("choices") or []:
                        text = (choice.get("delta") or {}).get("content")
                        if text:
                            yield TextDelta(text)
                    raw = chunk.get("usage")
                    if raw:
                        usage = Usage(raw["prompt_tokens"], raw["completion_tokens"])
            reusable = True
            yield usage
        finally:
            if reusable:
                self._idle.append((reader, writer))
            else:
                writer.close()


class InProcessModel:
    """Diagnostic only (`--gateway-model inprocess`): the stub's reply with no I/O at all,
    every token at once, so turns/s and CPU/turn show the gateway's own cost per turn."""

    def __init__(self, name: str, tokens: int) -> None:
        self.name = name
        self.texts = stub_tokens(tokens)

    async def stream(self, messages: Sequence[Any]) -> AsyncIterator[Any]:
        from sessiongate.models.base import TextDelta, Usage

        for text in self.texts:
            yield TextDelta(text)
        yield Usage(sum(len(m["content"]) for m in messages) // 4, len(self.texts))
