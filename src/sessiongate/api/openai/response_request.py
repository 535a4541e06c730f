"""A `POST /v1/responses` body read and checked (pydantic, errors in OpenAI's shape), the
client's own conversation id, and the hashes that make a continuation land after a
stored response or conversation (DESIGN.md §14)."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi import Request
from pydantic import BaseModel, ConfigDict, Field, StrictInt, ValidationError

from sessiongate.api.openai.response_render import OpenAIError
from sessiongate.core.conversation import ClientMessage, chain

#: The largest `max_output_tokens` taken (no model writes more in one reply).
MAX_OUTPUT_TOKENS = 1_000_000
#: What `include` asks for that the gateway has: reasoning signatures (Anthropic's).
ENCRYPTED_REASONING = "reasoning.encrypted_content"


class ResponseRequest(BaseModel):
    # Sampling parameters, `reasoning` and the like are accepted and ignored.
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1, max_length=200)
    input: str | list[dict[str, Any]] = Field(max_length=10_000)
    instructions: str | None = None
    previous_response_id: str | None = Field(None, max_length=200)
    conversation: str | dict[str, Any] | None = None
    store: bool = True
    stream: bool = False
    background: bool = False
    metadata: dict[str, str] | None = Field(None, max_length=16)
    tools: list[dict[str, Any]] | None = Field(None, max_length=128)
    tool_choice: str | dict[str, Any] | None = None
    text: dict[str, Any] | None = None
    # OpenAI's own bounds: at least 16; at most what any model's window holds.
    max_output_tokens: StrictInt | None = Field(None, ge=16, le=MAX_OUTPUT_TOKENS)
    include: list[str] | None = Field(None, max_length=32)
    parallel_tool_calls: bool = True
    prompt_cache_key: str | None = Field(None, max_length=512)


async def request_body(request: Request) -> ResponseRequest:
    try:
        raw = orjson.loads(await request.body())
    except orjson.JSONDecodeError:
        raise OpenAIError(400, "The request body is not valid JSON.", "invalid_json") from None
    if not isinstance(raw, dict):
        raise OpenAIError(400, "The request body must be a JSON object.", "invalid_request")
    try:
        return ResponseRequest.model_validate(raw)
    except ValidationError as exc:
        error = exc.errors()[0]
        param = ".".join(str(p) for p in error.get("loc", ())) or None
        message = f"Invalid value for '{param}': {error.get('msg', 'invalid')}"
        raise OpenAIError(400, message, "invalid_value", param) from None


def client_id_of(
    session_id: str | None, thread_id: str | None, body: ResponseRequest
) -> str | None:
    """The client's own conversation id: the `session-id` header, else `thread-id`, else
    `prompt_cache_key` (Codex CLI sends all three)."""
    for value in (session_id, thread_id, body.prompt_cache_key):
        if value is not None and value.strip():
            return value.strip()[:512]
    return None


def conversation_id_of(value: object) -> str | None:
    ident = value.get("id") if isinstance(value, dict) else value
    return ident if isinstance(ident, str) else None


def continuing(origin: str, tip: str, messages: tuple[ClientMessage, ...]) -> tuple[str, ...]:
    """The hashes of a continuation (`previous_response_id`, `conversation`): its list
    starts with the previous user text and answer (never stored again), named here by the
    conversation node the previous answer ended at, so the reconciler appends after it (the key's
    newest) or forks there (an older one)."""
    hashes = [f"~{origin}:0", f"~{origin}:1", tip]
    for message in messages[2:]:
        hashes.append(chain(hashes[-1], message))
    return tuple(hashes)
