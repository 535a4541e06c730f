"""The `openai` provider: any OpenAI-compatible chat-completions server (OpenAI, Ollama,
vLLM, llama.cpp, LM Studio) through the official SDK, streamed.

Retries are ours, not the SDK's (its `max_retries` is 0): only we know whether a token has
already reached the client, after which retrying would silently restart the answer.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, cast

import openai

from sessiongate.config import ModelConfig
from sessiongate.core.context import estimate_tokens
from sessiongate.models.base import ModelChunk, TextDelta, Usage, WireMessage
from sessiongate.models.retry import (
    PLACEHOLDER_KEY,
    Failure,
    RetryPolicy,
    StreamTruncated,
    api_key_for,
    bad_response,
    connection_failure,
    error_detail,
    error_event_failure,
    key_hint,
    require_model,
    status_failure,
    stream_with_retries,
    timeout_error,
    unexpected_failure,
)


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
        self._client = openai.AsyncOpenAI(
            api_key=api_key,
            base_url=base_url,
            timeout=openai.Timeout(read_timeout, connect=connect_timeout),
            max_retries=0,
        )

    @classmethod
    def from_config(cls, name: str, config: ModelConfig) -> OpenAIChatModel:
        return cls(
            name,
            model=require_model(name, config),
            base_url=config.base_url or None,
            api_key=api_key_for(name, config),
            api_key_env=config.api_key_env,
            connect_timeout=config.connect_timeout.total_seconds(),
            read_timeout=config.read_timeout.total_seconds(),
            max_retries=config.max_retries,
        )

    def stream(self, messages: Sequence[WireMessage]) -> AsyncIterator[ModelChunk]:
        wire = [{"role": m.get("role", "user"), "content": m.get("content", "")} for m in messages]
        return stream_with_retries(
            lambda: self._attempt(wire), self._classify, self._policy, label=self.label
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def _attempt(self, wire: list[dict[str, str]]) -> AsyncGenerator[ModelChunk, None]:
        stream = await self._client.chat.completions.create(
            model=self.model,
            messages=cast(Any, wire),
            stream=True,
            stream_options={"include_usage": True},
        )
        parts: list[str] = []
        usage: Usage | None = None
        finished = False
        try:
            async for chunk in stream:
                text, chunk_usage, chunk_finished = self._read_chunk(chunk)
                usage = chunk_usage or usage
                finished = finished or chunk_finished
                if text:
                    parts.append(text)
                    yield TextDelta(text)
        finally:
            await stream.close()
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
        """`(text, usage, finished)` from one chunk, checked by hand: the SDK builds chunks
        without validation, so a wrong shape would otherwise surface as an AttributeError."""
        choices = getattr(chunk, "choices", None)
        if not isinstance(choices, list):
            raise bad_response(self.label, "a chunk without a choices list")
        text, finished = "", False
        for choice in choices[:1]:  # n=1: the first choice is the answer
            content = getattr(getattr(choice, "delta", None), "content", None)
            if content is not None and not isinstance(content, str):
                raise bad_response(self.label, "delta.content is not a string")
            text = content or ""
            finished = getattr(choice, "finish_reason", None) is not None
        raw = getattr(chunk, "usage", None)
        if raw is None:
            return text, None, finished
        prompt = getattr(raw, "prompt_tokens", None)
        completion = getattr(raw, "completion_tokens", None)
        if not isinstance(prompt, int) or not isinstance(completion, int):
            raise bad_response(self.label, "usage without integer token counts")
        return text, Usage(prompt_tokens=prompt, completion_tokens=completion), finished

    def _classify(self, exc: Exception, started: bool) -> Failure:
        label = self.label
        if isinstance(exc, openai.APIStatusError):
            _, detail = error_detail(exc.body, self._key)
            return status_failure(
                label, exc.status_code, exc.response.headers, detail, self._key_hint
            )
        if isinstance(exc, openai.APITimeoutError):
            return Failure(timeout_error(label, started=started))
        if isinstance(exc, openai.APIConnectionError | StreamTruncated):
            return connection_failure(label, started=started)
        if isinstance(exc, openai.APIError):  # an error object inside the stream
            kind, detail = error_detail(exc.body, self._key)
            failure = error_event_failure(label, kind, detail)
            return Failure(failure.error) if started else failure
        if isinstance(exc, ValueError):  # invalid JSON in a data line
            return Failure(bad_response(label, "a data line is not valid JSON"))
        return unexpected_failure(label, exc)
