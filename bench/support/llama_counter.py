"""A loopback proxy in front of llama-cpp-python's server that learns the server's own
count of every prompt the gateway sends (bench/long_conversation_llama.py).

llama-cpp-python's server answers a non-streamed completion with `usage.prompt_tokens`
from the model's real tokenizer and chat template, but sends no usage at all when
streaming (it ignores `stream_options`), and the gateway streams everything. So for
each streamed chat completion the proxy first asks the same body non-streamed with
`max_tokens = 1` (the server keeps the evaluated prefix, so the real request that
follows costs little more) and keeps the count. With `report_usage` it also adds that
count to the stream as a final usage chunk, as llama.cpp's own server, vLLM, Ollama and
OpenAI do; without it the stream passes through as the server sent it.

Counts are kept per request in `counts` (the server's prompt tokens, None where the
probe failed: a prompt over the window).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import aiohttp
from aiohttp import web

DONE = b"data: [DONE]"


@dataclass
class CountingProxy:
    upstream: str
    #: The server's `n_ctx`: a prompt counted past it is a request over the window.
    window: int
    report_usage: bool = True
    counts: list[int | None] = field(default_factory=list)
    over_window: int = 0
    _runner: web.AppRunner | None = None
    _session: aiohttp.ClientSession | None = None
    url: str = ""

    async def start(self) -> str:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=900))
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def _count(self, body: dict[str, object]) -> int | None:
        assert self._session is not None
        probe = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        probe["max_tokens"] = 1
        async with self._session.post(self.upstream + "/v1/chat/completions", json=probe) as answer:
            if answer.status != 200:
                return None
            data = await answer.json()
        usage = data.get("usage") or {}
        count = usage.get("prompt_tokens")
        return int(count) if isinstance(count, int) else None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        raw = await request.read()
        body = json.loads(raw) if raw else {}
        streamed = request.path.endswith("/chat/completions") and body.get("stream")
        count = await self._count(body) if streamed else None
        if streamed:
            self.counts.append(count)
            if count is None or count > self.window:
                self.over_window += 1
        headers = {"Content-Type": request.headers.get("Content-Type", "application/json")}
        async with self._session.request(
            request.method, self.upstream + request.path_qs, data=raw, headers=headers
        ) as answer:
            if not streamed or answer.status != 200:
                return web.Response(
                    status=answer.status,
                    body=await answer.read(),
                    content_type=answer.content_type,
                )
            response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
            await response.prepare(request)
            completion = 0
            buffer = b""
            async for piece in answer.content.iter_any():
                buffer += piece
                while b"\n\n" in buffer:
                    event, buffer = buffer.split(b"\n\n", 1)
                    if event.strip() == DONE and self.report_usage and count is not None:
                        usage = {
                            "prompt_tokens": count,
                            "completion_tokens": completion,
                            "total_tokens": count + completion,
                        }
                        chunk = {"object": "chat.completion.chunk", "choices": [], "usage": usage}
                        await response.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
                    elif event.startswith(b"data: {"):
                        completion += 1  # one content chunk per token on this server
                    await response.write(event + b"\n\n")
            if buffer:
                await response.write(buffer)
            await response.write_eof()
            return response
