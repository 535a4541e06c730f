"""The `anthropic` provider: the Messages API through the official SDK, streamed.

Anthropic wants the system prompt apart from the messages, strictly alternating roles and
a user message first; `to_anthropic` (models/anthropic_wire.py) reshapes the gateway's
context to fit. Retries are ours (the SDK's `max_retries` is 0), for the same reason as in
the OpenAI adapter.

A tool call is a `tool_use` content block: `content_block_start` names it, its arguments
come as `input_json_delta` pieces, and `content_block_stop` ends it, when the whole call is
yielded. `stop_reason` "tool_use" is a normal end like any other.

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
from typing import Any, ClassVar, cast

import anthropic
import anyio
import httpx2

from sessiongate.config_models import ModelConfig
from sessiongate.core.context import estimate_tokens
from sessiongate.models.anthropic_wire import (
    LEADING_USER_PLACEHOLDER,
    json_instruction,
    to_anthropic,
    tool_fields,
)
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    TextDelta,
    ToolCallChunk,
    Usage,
    WireMessage,
    text_of,
)
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

__all__ = ["DEFAULT_MAX_TOKENS", "LEADING_USER_PLACEHOLDER", "AnthropicModel", "to_anthropic"]

#: The config has no field for it; long enough for any chat reply.
DEFAULT_MAX_TOKENS = 4096

log = logging.getLogger("sessiongate.models")

# Failures while the body streams: the SDK's stream passes the transport's own exceptions
# through unwrapped (only the request before the head becomes APIConnectionError).
_BODY_TIMEOUTS = (httpx2.TimeoutException, TimeoutError)
_BODY_DROPS = (httpx2.TransportError, anyio.EndOfStream, OSError)


class AnthropicModel:
    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(
        tools=True, images=True, json_output=True
    )

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

    def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        system, turns = to_anthropic(messages)
        instruction = json_instruction(options.response_format)
        if instruction:
            system = f"{system}\n\n{instruction}" if system else instruction
        fields = tool_fields(options)
        return stream_with_retries(
            lambda: self._attempt(system, turns, fields, messages),
            self._classify,
            self._policy,
            label=self.label,
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def _attempt(
        self,
        system: str,
        turns: list[dict[str, Any]],
        fields: dict[str, Any],
        messages: Sequence[WireMessage],
    ) -> AsyncGenerator[ModelChunk, None]:
        stream = await self._client.messages.create(
            model=self.model,
            max_tokens=self.max_tokens,
            system=system or anthropic.omit,
            messages=cast(Any, turns),
            stream=True,
            # Absent unless tools are offered: the SDK sends only what it is given.
            tools=fields.get("tools", anthropic.omit),
            tool_choice=fields.get("tool_choice", anthropic.omit),
        )
        parts: list[str] = []
        calls = _ToolBlocks()
        prompt: int | None = None
        completion: int | None = None
        stop_reason: str | None = None
        try:
            async for event in stream:
                kind = getattr(event, "type", None)
                if kind == "content_block_delta":
                    delta = getattr(event, "delta", None)
                    delta_kind = getattr(delta, "type", None)
                    if delta_kind == "input_json_delta":
                        calls.add(event, getattr(delta, "partial_json", None))
                        continue
                    if delta_kind != "text_delta":
                        continue  # thinking deltas are not reply text
                    text = getattr(delta, "text", None)
                    if not isinstance(text, str):
                        raise BadChunk("a text_delta without text")
                    if text:
                        parts.append(text)
                        yield TextDelta(text)
                elif kind == "content_block_start":
                    calls.start(event)
                elif kind == "content_block_stop":
                    call = calls.stop(event)
                    if call is not None:
                        yield call
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
        # A block the stream never closed, though the model said it had stopped.
        for call in calls.rest():
            yield call
        full = "".join(parts) + calls.argument_text
        yield Usage(
            prompt_tokens=prompt if prompt is not None else _estimate(system, messages),
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


def _estimate(system: str, messages: Sequence[WireMessage]) -> int:
    total = estimate_tokens(system)
    for message in messages:
        if message.get("role") != "system":  # already counted in `system`
            total += estimate_tokens(text_of(message.get("content", "")))
        for call in message.get("tool_calls") or ():
            total += estimate_tokens(str(call.get("arguments", "")))
    return total


class _ToolBlocks:
    """The `tool_use` blocks of one streamed message, by content-block index."""

    __slots__ = ("_open", "_pieces")

    def __init__(self) -> None:
        #: index -> (id, name, argument pieces, the input the start event carried)
        self._open: dict[int, tuple[str, str, list[str], object]] = {}
        self._pieces: list[str] = []  # every call's, for a usage estimate

    def start(self, event: object) -> None:
        block = getattr(event, "content_block", None)
        if getattr(block, "type", None) != "tool_use":
            return  # text, thinking, server tools: not calls for us to run
        index = _int(getattr(event, "index", None))
        call_id, name = getattr(block, "id", None), getattr(block, "name", None)
        if index is None or not isinstance(call_id, str) or not isinstance(name, str):
            raise BadChunk("a tool_use block without an index, id or name")
        if not name:
            raise BadChunk("a tool_use block with an empty name")
        self._open[index] = (call_id, name, [], getattr(block, "input", None))

    def add(self, event: object, partial: object) -> None:
        if not isinstance(partial, str):
            raise BadChunk("an input_json_delta without partial_json")
        index = _int(getattr(event, "index", None))
        if index is None:
            raise BadChunk("an input_json_delta without an index")
        block = self._open.get(index)
        if block is not None:  # else a server tool's input: not ours
            block[2].append(partial)
            self._pieces.append(partial)

    def stop(self, event: object) -> ToolCallChunk | None:
        index = _int(getattr(event, "index", None))
        block = self._open.pop(index, None) if index is not None else None
        return None if block is None else _call(*block)

    @property
    def argument_text(self) -> str:
        return "".join(self._pieces)

    def rest(self) -> list[ToolCallChunk]:
        calls = [_call(*self._open[index]) for index in sorted(self._open)]
        self._open.clear()
        return calls


def _call(call_id: str, name: str, pieces: list[str], start_input: object) -> ToolCallChunk:
    arguments = "".join(pieces)
    if not arguments and isinstance(start_input, dict) and start_input:
        # Some proxies put the whole input in the start event and stream no pieces.
        arguments = json.dumps(start_input)
    return ToolCallChunk(call_id, name, arguments or "{}")
