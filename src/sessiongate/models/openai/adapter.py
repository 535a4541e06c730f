"""The `openai` provider: any OpenAI-compatible chat-completions server (OpenAI, Ollama,
vLLM, llama.cpp, LM Studio), streamed. The request goes out over aiohttp directly
(models/openai/http.py: what the SDK sent, without its request layer's CPU), the body is
read here.

Retries are ours: only we know whether a token has already reached the client, after which
retrying would silently restart the answer. What fails before the response's head is a
timeout (connect or first byte: `model_timeout`, not retried) or an unreachable server
(`model_unavailable`, retried); a status other than 2xx is classified by
`status_failure` (a 400 or 413 whose message says the window was passed is
`context_overflow`); what fails while the body streams is a timeout or a dropped
connection, retried only before any text.

When a reply is complete: the first choice reported a `finish_reason`. That is the model
saying why it stopped ("stop", "length", "content_filter", "tool_calls"), and every text
delta and tool-call piece of the choice comes before it. Tool calls stream in pieces
(models/openai/wire.py assembles them) and are yielded whole, after the text, when the
finish_reason arrives: before it, a call's arguments may still grow.

`data: [DONE]` is only the server's end of the SSE stream: it ends the reading, but on its
own it is not enough (a server or proxy that gives up mid-generation can still close the
stream with it), so `[DONE]` or a clean end of the body without a `finish_reason` raises
`IncompleteStream` after the text that came (a tool call not finished by then is never
yielded). The other way round, a `finish_reason` followed by a body that closes, breaks or goes
quiet before `[DONE]` is a complete reply: the text is whole by the model's own account,
only the trailing usage chunk and `[DONE]` are missing (usage is then estimated), and
several compatible servers end the body without `[DONE]` at all. Marking such a reply
`interrupted` would tell the user a whole answer was cut.

The SSE lines are read by models/sse.py, in linear time: a line longer than
`max_line_bytes` (8 MiB) fails the stream as `model_bad_response`. Of each tool call's
arguments only the request's `max_tool_argument_chars` are kept (models/tool_arguments.py).
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from typing import Any, ClassVar, TypeGuard

import aiohttp
import orjson

from sessiongate.config.models import ModelConfig
from sessiongate.core.context import estimate_tokens
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    ReasoningDelta,
    StopReason,
    TextDelta,
    Usage,
    WireMessage,
    text_of,
)
from sessiongate.models.openai.http import (
    ChatCompletionsClient,
    NoAnswer,
    StatusError,
    abandon,
    finish,
)
from sessiongate.models.openai.wire import ToolCallPieces, option_fields, to_openai
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
    refused,
    sdk_adapter_kwargs,
    status_failure,
    stream_with_retries,
    timeout_error,
    truncated_failure,
    unexpected_failure,
    unreachable_failure,
)
from sessiongate.models.sse import DEFAULT_MAX_LINE_BYTES, data_lines
from sessiongate.models.tool_arguments import argument_limit

log = logging.getLogger("sessiongate.models")

# Failures while the body streams, as aiohttp raises them: its read timeouts are
# `TimeoutError`s (and `ClientError`s too, hence timeouts first), a body cut short a
# `ClientPayloadError`, a reset an `OSError`.
_BODY_TIMEOUTS = (TimeoutError,)
_BODY_DROPS = (aiohttp.ClientError, OSError)


def _is_int(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


class OpenAIChatModel:
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
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    ) -> None:
        self.name = name
        self.model = model
        self.label = f"model {name!r} (openai {model})"
        self._max_line_bytes = max_line_bytes
        # OpenAI's own API takes `max_completion_tokens` (its reasoning models refuse
        # `max_tokens`); the compatible servers (vLLM, llama.cpp, Ollama, LM Studio) all
        # take `max_tokens`.
        self._limit_field = (
            "max_completion_tokens"
            if base_url is None or "api.openai.com" in base_url
            else "max_tokens"
        )
        self._key = api_key
        self._key_hint = key_hint(name, api_key_env)
        self._policy = RetryPolicy(max_retries=max_retries, base_delay=base_delay)
        self._client = ChatCompletionsClient(
            base_url=base_url,
            api_key=api_key,
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
        )

    @classmethod
    def from_config(cls, name: str, config: ModelConfig) -> OpenAIChatModel:
        return cls(name, **sdk_adapter_kwargs(name, config))

    def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        payload: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        # After the fixed fields, and only what `options` ask for: a text-only request's
        # body stays byte for byte what it was.
        payload.update(option_fields(options))
        if options.max_output_tokens is not None:
            payload[self._limit_field] = options.max_output_tokens
        max_argument_chars = argument_limit(options)
        return stream_with_retries(
            lambda: self._attempt(payload, messages, max_argument_chars),
            self._classify,
            self._policy,
            label=self.label,
        )

    async def aclose(self) -> None:
        await self._client.aclose()

    async def _attempt(
        self, payload: dict[str, Any], messages: Sequence[WireMessage], max_argument_chars: int
    ) -> AsyncGenerator[ModelChunk, None]:
        # Encoded with orjson; the SSE lines are split from the raw bytes (models/sse.py)
        # and each chunk's shape checked by hand: the SDK's typed path built a model per
        # chunk, ~0.17 ms each, most of the gateway's CPU per turn at a 50-message window.
        response = await self._client.open(orjson.dumps(payload))
        parts: list[str] = []
        calls = ToolCallPieces(max_argument_chars)
        usage: Usage | None = None
        finished = False
        ended = False  # `[DONE]` read: the connection may go back to the pool
        try:
            async for data in data_lines(
                response.content.iter_any(), max_line_bytes=self._max_line_bytes
            ):
                if data == b"[DONE]":
                    ended = True
                    break
                chunk = orjson.loads(data)
                if isinstance(chunk, dict) and "error" in chunk:
                    raise StreamErrorObject(chunk["error"])
                text, chunk_usage, reason, thought = _read_chunk(chunk, calls)
                usage = chunk_usage or usage
                if thought:
                    yield ReasoningDelta(thought)
                if text:
                    parts.append(text)
                    yield TextDelta(text)
                if reason is not None and not finished:
                    finished = True
                    # Whatever the reason: arguments cut by "length" are invalid JSON,
                    # which the tool registry answers to the model as an error.
                    for call in calls.finish():
                        yield call
                    if reason == "length":
                        yield StopReason("length")
        except _BODY_DROPS as exc:  # timeouts included
            if not finished:
                raise
            # The reply was whole; only the usage chunk and [DONE] were lost.
            log.info(
                "model_stream_tail_lost",
                extra={"model": self.label, "detail": describe(exc, self._key)},
            )
        finally:
            if ended:
                await finish(response)
            else:
                abandon(response)
        if not finished:
            raise StreamTruncated
        if usage is None:  # servers without stream_options support send no usage chunk
            usage = Usage(
                prompt_tokens=_estimate_prompt(messages),
                completion_tokens=estimate_tokens("".join(parts) + calls.argument_text()),
                estimated=True,
            )
        yield usage

    def _classify(self, exc: Exception, started: bool) -> Failure:
        key = self._key
        if isinstance(exc, StatusError):
            _, detail = error_detail(exc.body, key)
            return status_failure(exc.status, exc.headers, detail, key_hint=self._key_hint)
        if isinstance(exc, NoAnswer):  # before the answer's head
            cause = exc.cause
            if isinstance(cause, TimeoutError) and not refused(cause):
                return Failure(timeout_error(started=False), detail=describe(cause, key))
            return unreachable_failure(cause, key)
        if isinstance(exc, StreamTruncated):
            return truncated_failure(started=started)
        if isinstance(exc, StreamErrorObject):
            kind, detail = error_detail(exc.body, key)
            return error_event_failure(kind, detail, started=started)
        if isinstance(exc, _BODY_TIMEOUTS):
            return Failure(timeout_error(started=started), detail=describe(exc, key))
        if isinstance(exc, _BODY_DROPS):
            return dropped_failure(exc, key, started=started)
        if isinstance(exc, BadChunk | json.JSONDecodeError):  # orjson's is a subclass
            return bad_response(describe(exc, key))
        return unexpected_failure(exc, key)


def _estimate_prompt(messages: Sequence[WireMessage]) -> int:
    total = 0
    for message in messages:
        total += estimate_tokens(text_of(message.get("content", "")))
        for call in message.get("tool_calls") or ():
            total += estimate_tokens(str(call.get("arguments", "")))
    return total


def _read_chunk(chunk: object, calls: ToolCallPieces) -> tuple[str, Usage | None, str | None, str]:
    """`(text, usage, finish_reason, reasoning)` from one decoded chunk, its shape checked
    by hand; its tool-call pieces go to `calls`. Reasoning is `delta.reasoning_content`
    (vLLM, llama.cpp, DeepSeek) or `delta.reasoning` (Ollama, newer vLLM)."""
    if not isinstance(chunk, dict):
        raise BadChunk("a chunk that is not a JSON object")
    choices = chunk.get("choices")
    if not isinstance(choices, list):
        raise BadChunk("a chunk without a choices list")
    text, finished, thought = "", None, ""
    for choice in choices[:1]:  # n=1: the first choice is the answer
        if not isinstance(choice, dict):
            raise BadChunk("a choice that is not an object")
        delta = choice.get("delta")
        content = delta.get("content") if isinstance(delta, dict) else None
        if content is not None and not isinstance(content, str):
            raise BadChunk("delta.content is not a string")
        text = content or ""
        if isinstance(delta, dict):
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            thought = reasoning if isinstance(reasoning, str) else ""
        pieces = delta.get("tool_calls") if isinstance(delta, dict) else None
        if pieces is not None:
            calls.add(pieces)
        reason = choice.get("finish_reason")
        finished = None if reason is None else str(reason)
    raw = chunk.get("usage")
    if raw is None:
        return text, None, finished, thought
    prompt = raw.get("prompt_tokens") if isinstance(raw, dict) else None
    completion = raw.get("completion_tokens") if isinstance(raw, dict) else None
    if not _is_int(prompt) or not _is_int(completion):
        raise BadChunk("usage without integer token counts")
    return text, Usage(prompt_tokens=prompt, completion_tokens=completion), finished, thought
