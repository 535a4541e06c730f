"""The `anthropic` provider: the Messages API through the official SDK, streamed.

Anthropic wants the system prompt apart from the messages, strictly alternating roles and
a user message first; `to_anthropic` reshapes the gateway's context to fit. Retries are
ours (the SDK's `max_retries` is 0), for the same reason as in the OpenAI adapter.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, cast

import anthropic
import anyio
import httpx2

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

#: The config has no field for it; long enough for any chat reply.
DEFAULT_MAX_TOKENS = 4096
#: Stands in when the context window starts on an assistant message.
LEADING_USER_PLACEHOLDER = "(earlier conversation omitted)"

# The SDK does not wrap transport errors raised while the body streams.
_TIMEOUTS = (anthropic.APITimeoutError, httpx2.TimeoutException)
_DROPS = (
    anthropic.APIConnectionError,
    httpx2.TransportError,
    anyio.EndOfStream,
    OSError,
    StreamTruncated,
)


def to_anthropic(messages: Sequence[WireMessage]) -> tuple[str, list[dict[str, str]]]:
    """`(system, messages)`: system texts joined; same-role neighbours merged; empty
    messages dropped (the API rejects empty text); a user message first."""
    system: list[str] = []
    turns: list[dict[str, str]] = []
    for message in messages:
        role, content = message.get("role", "user"), message.get("content", "")
        if role == "system":
            if content.strip():
                system.append(content)
            continue
        if not content.strip():
            continue
        role = "assistant" if role == "assistant" else "user"
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + content
        else:
            turns.append({"role": role, "content": content})
    if not turns or turns[0]["role"] != "user":
        turns.insert(0, {"role": "user", "content": LEADING_USER_PLACEHOLDER})
    return "\n\n".join(system), turns


class AnthropicModel:
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
        max_tokens: int = DEFAULT_MAX_TOKENS,
    ) -> None:
        self.name = name
        self.model = model
        self.max_tokens = max_tokens
        self.label = f"model {name!r} (anthropic {model})"
        self._key = api_key
        self._key_hint = key_hint(name, api_key_env)
        self._policy = RetryPolicy(max_retries=max_retries, base_delay=base_delay)
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            base_url=base_url,
            timeout=anthropic.Timeout(read_timeout, connect=connect_timeout),
            max_retries=0,
        )

    @classmethod
    def from_config(cls, name: str, config: ModelConfig) -> AnthropicModel:
        return cls(name, **sdk_adapter_kwargs(name, config))

    def stream(self, messages: Sequence[WireMessage]) -> AsyncIterator[ModelChunk]:
        system, turns = to_anthropic(messages)
        return stream_with_retries(
            lambda: self._attempt(system, turns), self._classify, self._policy, label=self.label
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def _attempt(
        self, system: str, turns: list[dict[str, str]]
    ) -> AsyncGenerator[ModelChunk, None]:
        stream = await self._client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=system or anthropic.omit,
            messages=cast(Any, turns),
            stream=True,
        )
        parts: list[str] = []
        prompt: int | None = None
        completion: int | None = None
        stopped = False
        try:
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "message_start":
                    usage = getattr(getattr(event, "message", None), "usage", None)
                    prompt = _prompt_tokens(usage) or prompt
                    completion = _int(getattr(usage, "output_tokens", None)) or completion
                elif kind == "content_block_delta":
                    delta = getattr(event, "delta", None)
                    if getattr(delta, "type", None) != "text_delta":
                        continue  # thinking / tool-input deltas are not reply text
                    text = getattr(delta, "text", None)
                    if not isinstance(text, str):
                        raise bad_response(self.label, "a text_delta without text")
                    if text:
                        parts.append(text)
                        yield TextDelta(text)
                elif kind == "message_delta":
                    usage = getattr(event, "usage", None)
                    prompt = _prompt_tokens(usage) or prompt
                    completion = _int(getattr(usage, "output_tokens", None)) or completion
                elif kind == "message_stop":
                    stopped = True
        finally:
            await stream.close()
        if not stopped:  # the protocol always ends with message_stop
            raise StreamTruncated
        full = "".join(parts)
        yield Usage(
            prompt_tokens=prompt if prompt is not None else _estimate(system, turns),
            completion_tokens=completion if completion is not None else estimate_tokens(full),
        )

    def _classify(self, exc: Exception, started: bool) -> Failure:
        label = self.label
        if isinstance(exc, anthropic.APIStatusError):
            kind, detail = error_detail(exc.body, self._key)
            if exc.status_code < 400:  # an `error` event inside a 200 stream
                failure = error_event_failure(label, kind, detail)
                return Failure(failure.error) if started else failure
            return status_failure(
                label, exc.status_code, exc.response.headers, detail, self._key_hint
            )
        if isinstance(exc, _TIMEOUTS):
            return Failure(timeout_error(label, started=started))
        if isinstance(exc, _DROPS):
            return connection_failure(label, started=started)
        if isinstance(exc, ValueError):  # invalid JSON in a data line
            return Failure(bad_response(label, "a data line is not valid JSON"))
        return unexpected_failure(label, exc)


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _prompt_tokens(usage: object) -> int | None:
    """Input tokens including cached ones: what the prompt cost in context."""
    base = _int(getattr(usage, "input_tokens", None))
    if base is None:
        return None
    cached = (
        _int(getattr(usage, "cache_creation_input_tokens", None)) or 0,
        _int(getattr(usage, "cache_read_input_tokens", None)) or 0,
    )
    return base + sum(cached)


def _estimate(system: str, turns: list[dict[str, str]]) -> int:
    return estimate_tokens(system) + sum(estimate_tokens(t["content"]) for t in turns)
