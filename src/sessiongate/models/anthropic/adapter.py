"""The `anthropic` provider: the Messages API through the official SDK, streamed.

Anthropic wants the system prompt apart from the messages, strictly alternating roles and
a user message first; `to_anthropic` (models/anthropic/wire.py) reshapes the gateway's
context to fit. Retries are ours (the SDK's `max_retries` is 0), for the same reason as in
the OpenAI adapter. As there, the SDK sends the request and the SSE body is read here, by
models/sse.py (linear time, a line over `max_line_bytes` fails the stream): each event's
JSON `type` says what it is, an `error` event is the provider's error inside the stream.

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
from typing import Any, ClassVar

import anthropic
import anyio
import httpx2
import orjson

from sessiongate.config.models import ModelConfig
from sessiongate.core.context import estimate_tokens
from sessiongate.models.anthropic.wire import (
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
    ReasoningDelta,
    StopReason,
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
    StreamErrorObject,
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
from sessiongate.models.sse import DEFAULT_MAX_LINE_BYTES, data_lines
from sessiongate.models.tool_arguments import ArgumentBuffer, argument_limit

__all__ = ["DEFAULT_MAX_TOKENS", "LEADING_USER_PLACEHOLDER", "AnthropicModel", "to_anthropic"]

#: The config has no field for it; long enough for any chat reply.
DEFAULT_MAX_TOKENS = 4096

log = logging.getLogger("sessiongate.models")

# Failures while the body streams: it is read from the `httpx2.Response` itself, so the
# transport's own exceptions arrive unwrapped (only the request before the head becomes
# APIConnectionError).
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
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.name = name
        self.model = model
        self.max_tokens = max_tokens
        self._max_line_bytes = max_line_bytes
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
        max_argument_chars = argument_limit(options)
        max_tokens = options.max_output_tokens or self.max_tokens
        return stream_with_retries(
            lambda: self._attempt(system, turns, fields, messages, max_argument_chars, max_tokens),
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
        max_argument_chars: int,
        max_tokens: int,
    ) -> AsyncGenerator[ModelChunk, None]:
        payload: dict[str, Any] = {
            "model": self.model,
            "max_tokens": max_tokens,
            "messages": turns,
            "stream": True,
        }
        if system:
            payload["system"] = system
        # Absent unless tools are offered.
        payload.update(fields)
        # The SDK sends the request (auth, version header, base URL, timeouts, typed status
        # errors) and hands back the body unread; its own event stream would buffer an
        # event by rejoining bytes per network chunk, which a line without an end makes
        # quadratic and unbounded (models/sse.py reads it instead).
        response = await self._client.post(
            "/v1/messages", cast_to=httpx2.Response, content=orjson.dumps(payload), stream=True
        )
        parts: list[str] = []
        calls = _ToolBlocks(max_argument_chars)
        prompt: int | None = None
        completion: int | None = None
        stop_reason: str | None = None
        try:
            body = response.aiter_bytes()
            async for data in data_lines(body, max_line_bytes=self._max_line_bytes):
                event = orjson.loads(data)
                if not isinstance(event, dict):
                    raise BadChunk("an event that is not a JSON object")
                kind = event.get("type")
                if kind == "content_block_delta":
                    delta = _object(event.get("delta"))
                    delta_kind = delta.get("type")
                    if delta_kind == "input_json_delta":
                        calls.add(event, delta.get("partial_json"))
                        continue
                    if delta_kind == "thinking_delta":
                        thought = delta.get("thinking")
                        if isinstance(thought, str) and thought:
                            yield ReasoningDelta(thought)
                        continue
                    if delta_kind == "signature_delta":
                        signature = delta.get("signature")
                        if isinstance(signature, str) and signature:
                            yield ReasoningDelta("", signature=signature)
                        continue
                    if delta_kind != "text_delta":
                        continue  # other deltas (citations, …) are not reply text
                    text = delta.get("text")
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
                    usage = _object(_object(event.get("message")).get("usage"))
                    prompt = _prompt_tokens(usage) or prompt
                    completion = _int(usage.get("output_tokens")) or completion
                elif kind == "message_delta":
                    usage = _object(event.get("usage"))
                    prompt = _prompt_tokens(usage) or prompt
                    completion = _int(usage.get("output_tokens")) or completion
                    reason = _object(event.get("delta")).get("stop_reason")
                    stop_reason = reason if isinstance(reason, str) else stop_reason
                elif kind == "message_stop":
                    break  # the stream's own end; whether the reply is whole is stop_reason's
                elif kind == "error":
                    raise StreamErrorObject(event)
                # ping and event types this adapter does not know: nothing to do
        except _BODY_DROPS as exc:  # timeouts included
            if stop_reason is None:
                raise
            # The reply was whole; only message_stop was lost.
            log.info(
                "model_stream_tail_lost",
                extra={"model": self.label, "detail": describe(exc, self._key)},
            )
        finally:
            await response.aclose()
        if stop_reason is None:
            raise StreamTruncated
        # A block the stream never closed, though the model said it had stopped.
        for call in calls.rest():
            yield call
        if stop_reason == "max_tokens":
            yield StopReason("length")
        full = "".join(parts) + calls.argument_text()
        yield Usage(
            prompt_tokens=prompt if prompt is not None else _estimate(system, messages),
            completion_tokens=completion if completion is not None else estimate_tokens(full),
            estimated=prompt is None or completion is None,
        )

    def _classify(self, exc: Exception, started: bool) -> Failure:
        key = self._key
        if isinstance(exc, anthropic.APIStatusError):
            _, detail = error_detail(exc.body, key)
            return status_failure(
                exc.status_code, exc.response.headers, detail, key_hint=self._key_hint
            )
        if isinstance(exc, StreamErrorObject):  # an `error` event inside a 200 stream
            kind, detail = error_detail(exc.body, key)
            return error_event_failure(kind, detail, started=started)
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


def _object(value: object) -> dict[str, Any]:
    """`value` when it is a JSON object, else an empty one (a field that is missing or of
    the wrong shape reads as absent, as the SDK's lenient models read it)."""
    return value if isinstance(value, dict) else {}


def _prompt_tokens(usage: dict[str, Any]) -> int | None:
    """Input tokens including cached ones: what the prompt cost in context."""
    base = _int(usage.get("input_tokens"))
    if base is None:
        return None
    cached = (
        _int(usage.get("cache_creation_input_tokens")) or 0,
        _int(usage.get("cache_read_input_tokens")) or 0,
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
    """The `tool_use` blocks of one streamed message, by content-block index. Of each
    call's arguments the first `max_argument_chars` are kept and the rest only counted
    (models/tool_arguments.py)."""

    __slots__ = ("_done", "_max_argument_chars", "_open")

    def __init__(self, max_argument_chars: int) -> None:
        self._max_argument_chars = max_argument_chars
        #: index -> (id, name, its arguments, the input the start event carried)
        self._open: dict[int, tuple[str, str, ArgumentBuffer, object]] = {}
        self._done: list[ArgumentBuffer] = []  # closed calls', for a usage estimate

    def start(self, event: dict[str, Any]) -> None:
        block = _object(event.get("content_block"))
        if block.get("type") != "tool_use":
            return  # text, thinking, server tools: not calls for us to run
        index = _int(event.get("index"))
        call_id, name = block.get("id"), block.get("name")
        if index is None or not isinstance(call_id, str) or not isinstance(name, str):
            raise BadChunk("a tool_use block without an index, id or name")
        if not name:
            raise BadChunk("a tool_use block with an empty name")
        arguments = ArgumentBuffer(self._max_argument_chars)
        self._open[index] = (call_id, name, arguments, block.get("input"))

    def add(self, event: dict[str, Any], partial: object) -> None:
        if not isinstance(partial, str):
            raise BadChunk("an input_json_delta without partial_json")
        index = _int(event.get("index"))
        if index is None:
            raise BadChunk("an input_json_delta without an index")
        block = self._open.get(index)
        if block is not None:  # else a server tool's input: not ours
            block[2].add(partial)

    def stop(self, event: dict[str, Any]) -> ToolCallChunk | None:
        index = _int(event.get("index"))
        block = self._open.pop(index, None) if index is not None else None
        if block is None:
            return None
        self._done.append(block[2])
        return _call(*block)

    def argument_text(self) -> str:
        buffers = [*self._done, *(block[2] for block in self._open.values())]
        return "".join(arguments.text() for arguments in buffers)

    def rest(self) -> list[ToolCallChunk]:
        calls = [_call(*self._open[index]) for index in sorted(self._open)]
        self._done += [block[2] for block in self._open.values()]
        self._open.clear()
        return calls


def _call(call_id: str, name: str, arguments: ArgumentBuffer, start_input: object) -> ToolCallChunk:
    if not arguments.size and isinstance(start_input, dict) and start_input:
        # Some proxies put the whole input in the start event and stream no pieces.
        arguments.add(json.dumps(start_input))
    return arguments.chunk(call_id, name)
