"""The `anthropic` provider: the Messages API through the official SDK, streamed.

Anthropic wants the system prompt apart from the messages, strictly alternating roles and
a user message first; `to_anthropic` reshapes the gateway's context to fit. Retries are
ours (the SDK's `max_retries` is 0), for the same reason as in the OpenAI adapter.

When a reply is complete: a `message_delta` carried a `stop_reason` ("end_turn",
"max_tokens", "stop_sequence", …): the model saying why it stopped, sent after the last
content block. The same rule as the OpenAI adapter's `finish_reason`: a body that ends
without one (even if it ends with `message_stop`) raises `IncompleteStream` after the text
that came, while a `stop_reason` followed by a body that closes, breaks or goes quiet
before `message_stop` is complete, since only the framing event is missing.
"""

from __future__ import annotations

import json
import logging
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
    BadChunk,
    Failure,
    RetryPolicy,
    StreamTruncated,
    bad_response,
    describe,
    dropped_failure,
    error_detail,
    error_event_failure,
    key_hint,
    sdk_adapter_kwargs,
    status_failure,
    stream_with_retries,
    timeout_error,
    truncated_failure,
    unexpected_failure,
    unreachable_failure,
)

#: The config has no field for it; long enough for any chat reply.
DEFAULT_MAX_TOKENS = 4096
#: Stands in when the context window starts on an assistant message.
LEADING_USER_PLACEHOLDER = "(earlier conversation omitted)"

log = logging.getLogger("sessiongate.models")

# Failures while the body streams: the SDK's stream passes the transport's own exceptions
# through unwrapped (only the request before the head becomes APIConnectionError).
_BODY_TIMEOUTS = (httpx2.TimeoutException, TimeoutError)
_BODY_DROPS = (httpx2.TransportError, anyio.EndOfStream, OSError)


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
        stop_reason: str | None = None
        try:
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "content_block_delta":
                    delta = getattr(event, "delta", None)
                    if getattr(delta, "type", None) != "text_delta":
                        continue  # thinking / tool-input deltas are not reply text
                    text = getattr(delta, "text", None)
                    if not isinstance(text, str):
                        raise BadChunk("a text_delta without text")
                    if text:
                        parts.append(text)
                        yield TextDelta(text)
                elif kind == "message_start":
                    usage = getattr(getattr(event, "message", None), "usage", None)
                    prompt = _prompt_tokens(usage) or prompt
                    completion = _int(getattr(usage, "output_tokens", None)) or completion
                elif kind == "message_delta":
                    usage = getattr(event, "usage", None)
                    prompt = _prompt_tokens(usage) or prompt
                    completion = _int(getattr(usage, "output_tokens", None)) or completion
                    reason = getattr(getattr(event, "delta", None), "stop_reason", None)
                    stop_reason = reason if isinstance(reason, str) else stop_reason
        except _BODY_DROPS as exc:  # timeouts included
            if stop_reason is None:
                raise
            # The reply was whole; only message_stop was lost.
            log.info(
                "model_stream_tail_lost",
                extra={"model": self.label, "detail": describe(exc, self._key)},
            )
        finally:
            await stream.close()
        if stop_reason is None:
            raise StreamTruncated
        full = "".join(parts)
        yield Usage(
            prompt_tokens=prompt if prompt is not None else _estimate(system, turns),
            completion_tokens=completion if completion is not None else estimate_tokens(full),
        )

    def _classify(self, exc: Exception, started: bool) -> Failure:
        key = self._key
        if isinstance(exc, anthropic.APIStatusError):
            kind, detail = error_detail(exc.body, key)
            if exc.status_code < 400:  # an `error` event inside a 200 stream
                return error_event_failure(kind, detail, started=started)
            return status_failure(
                exc.status_code, exc.response.headers, detail, key_hint=self._key_hint
            )
        if isinstance(exc, anthropic.APITimeoutError):  # no answer's head in time
            return Failure(timeout_error(started=False), detail=describe(exc, key))
        if isinstance(exc, anthropic.APIConnectionError):  # before the answer's head
            return unreachable_failure(exc, key)
        if isinstance(exc, StreamTruncated):
            return truncated_failure(started=started)
        if isinstance(exc, _BODY_TIMEOUTS):
            return Failure(timeout_error(started=started), detail=describe(exc, key))
        if isinstance(exc, _BODY_DROPS):
            return dropped_failure(exc, key, started=started)
        if isinstance(exc, BadChunk | json.JSONDecodeError):  # orjson's is a subclass
            return bad_response(describe(exc, key))
        return unexpected_failure(exc, key)


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
