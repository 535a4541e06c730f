"""The `openai` provider: any OpenAI-compatible chat-completions server (OpenAI, Ollama,
vLLM, llama.cpp, LM Studio) through the official SDK, streamed.

Retries are ours, not the SDK's (its `max_retries` is 0): only we know whether a token has
already reached the client, after which retrying would silently restart the answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import TypeGuard

import aiohttp
import anyio
import httpx2
import openai
import orjson

from sessiongate.config import ModelConfig
from sessiongate.core.context import estimate_tokens
from sessiongate.models.base import ModelChunk, TextDelta, Usage, WireMessage
from sessiongate.models.retry import (
    PLACEHOLDER_KEY,
    Failure,
    RetryPolicy,
    StreamTruncated,
    bad_response,
    connection_failure,
    error_detail,
    error_event_failure,
    key_hint,
    sdk_adapter_kwargs,
    status_failure,
    stream_with_retries,
    timeout_error,
    unexpected_failure,
)

# Reading the body of the `httpx2.Response` itself, transport errors arrive unwrapped.
_TIMEOUTS = (openai.APITimeoutError, httpx2.TimeoutException)
_DROPS = (
    openai.APIConnectionError,
    StreamTruncated,
    httpx2.TransportError,
    anyio.EndOfStream,
    aiohttp.ClientError,
    OSError,
)


async def _data_lines(body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """The payloads of SSE `data:` lines, split from raw bytes (cheaper than the client's
    text decoding, which re-detects the charset for every network chunk)."""
    pending = b""
    async for piece in body:
        pending += piece
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.startswith(b"data:"):
                yield line[5:].strip()
    if pending.startswith(b"data:"):
        yield pending[5:].strip()


def _refused(exc: BaseException) -> bool:
    """A connect "timeout" whose cause is a refused or reset connection: the aiohttp
    transport reports an absent server as ConnectTimeout, which is not a slow server."""
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, ConnectionError):
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class OpenAIChatModel:
    def __init__(
        self,
        name: str,
        *,
        model: str,
        base_url: str | None = None,
        api_key: str = PLACEHOLDER_KEY,
        api_key_env: str | None = None,
        connect_timeout: float = 10.0,
        read_timeout: float = 120.0,
        max_retries: int = 2,
        base_delay: float = 0.5,
    ) -> None:
        self.name = name
        self.model = model
        self.label = f"model {name!r} (openai {model})"
        self._key = api_key
        self._key_hint = key_hint(name, api_key_env)
        self._policy = RetryPolicy(max_retries=max_retries, base_delay=base_delay)
        timeout = openai.Timeout(read_timeout, connect=connect_timeout)
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=timeout,
            max_retries=0,
            # The SDK's aiohttp transport: far less CPU per streamed reply than its
            # default HTTP stack when many sessions stream at once (bench/gateway_load.py).
            http_client=openai.DefaultAioHttpClient(timeout=timeout),
        )

    @classmethod
    def from_config(cls, name: str, config: ModelConfig) -> OpenAIChatModel:
        return cls(name, **sdk_adapter_kwargs(name, config))

    def stream(self, messages: Sequence[WireMessage]) -> AsyncIterator[ModelChunk]:
        wire = [{"role": m.get("role", "user"), "content": m.get("content", "")} for m in messages]
        return stream_with_retries(
            lambda: self._attempt(wire), self._classify, self._policy, label=self.label
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def _attempt(self, wire: list[dict[str, str]]) -> AsyncGenerator[ModelChunk, None]:
        # The SDK sends the request (auth, base URL, timeouts, typed status errors) through
        # its public `post` for custom requests, asked for the `httpx2.Response` itself with
        # the body left unread, and the SSE lines are parsed here: the typed `create` path
        # transforms every message and builds a model per chunk, ~0.17 ms each, which at a
        # 50-message window was most of the gateway's CPU per turn (bench/gateway_load.py).
        payload = {
            "model": self.model,
            "messages": wire,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        response = await self._client.post(
            "/chat/completions",
            cast_to=httpx2.Response,
            # Encoded here: the SDK's pure-Python encoder costs more per turn.
            content=orjson.dumps(payload),
            stream=True,
        )
        parts: list[str] = []
        usage: Usage | None = None
        finished = False
        try:
            async for data in _data_lines(response.aiter_bytes()):
                if data == b"[DONE]":
                    break
                chunk = orjson.loads(data)
                if isinstance(chunk, dict) and "error" in chunk:
                    raise openai.APIError("error in stream", response.request, body=chunk["error"])
                text, chunk_usage, chunk_finished = self._read_chunk(chunk)
                usage = chunk_usage or usage
                finished = finished or chunk_finished
                if text:
                    parts.append(text)
                    yield TextDelta(text)
        finally:
            await response.aclose()
        if not finished and not parts:
            # An empty body with neither text nor a finish_reason is not an answer.
            raise StreamTruncated
        if usage is None:  # servers without stream_options support send no usage chunk
            usage = Usage(
                prompt_tokens=sum(estimate_tokens(m["content"]) for m in wire),
                completion_tokens=estimate_tokens("".join(parts)),
            )
        yield usage

    def _read_chunk(self, chunk: object) -> tuple[str, Usage | None, bool]:
        """`(text, usage, finished)` from one decoded chunk, its shape checked by hand."""
        if not isinstance(chunk, dict):
            raise bad_response(self.label, "a chunk that is not a JSON object")
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            raise bad_response(self.label, "a chunk without a choices list")
        text, finished = "", False
        for choice in choices[:1]:  # n=1: the first choice is the answer
            if not isinstance(choice, dict):
                raise bad_response(self.label, "a choice that is not an object")
            delta = choice.get("delta")
            content = delta.get("content") if isinstance(delta, dict) else None
            if content is not None and not isinstance(content, str):
                raise bad_response(self.label, "delta.content is not a string")
            text = content or ""
            finished = choice.get("finish_reason") is not None
        raw = chunk.get("usage")
        if raw is None:
            return text, None, finished
        prompt = raw.get("prompt_tokens") if isinstance(raw, dict) else None
        completion = raw.get("completion_tokens") if isinstance(raw, dict) else None
        if not _is_int(prompt) or not _is_int(completion):
            raise bad_response(self.label, "usage without integer token counts")
        return text, Usage(prompt_tokens=prompt, completion_tokens=completion), finished

    def _classify(self, exc: Exception, started: bool) -> Failure:
        label = self.label
        if isinstance(exc, openai.APIStatusError):
            _, detail = error_detail(exc.body, self._key)
            return status_failure(
                label, exc.status_code, exc.response.headers, detail, self._key_hint
            )
        if isinstance(exc, _TIMEOUTS) and not _refused(exc):
            return Failure(timeout_error(label, started=started))
        if isinstance(exc, _DROPS):
            return connection_failure(label, started=started)
        if isinstance(exc, openai.APIError):  # an error object inside the stream
            kind, detail = error_detail(exc.body, self._key)
            failure = error_event_failure(label, kind, detail)
            return Failure(failure.error) if started else failure
        if isinstance(exc, ValueError):  # invalid JSON in a data line
            return Failure(bad_response(label, "a data line is not valid JSON"))
        return unexpected_failure(label, exc)
