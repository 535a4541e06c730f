"""OpenAI-compatible `/v1/models` and `/v1/chat/completions`.

`model` names an agent; `X-Session-Key` picks the session key (else the user's route).
The gateway keeps the history, so only the last user message of `messages` is taken as
the new turn; earlier messages a client re-sends are ignored, never duplicated.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any, assert_never

import orjson
from fastapi import APIRouter, Header, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import CurrentUser, caller_for, routes_of
from sessiongate.api.errors import error_response
from sessiongate.api.sse import collect_reply, reply_status
from sessiongate.api.turns import SSE_HEADERS, begin_turn
from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    AudioEvent,
    ClassificationEvent,
    ContextLogEvent,
    EndEvent,
    ErrorEvent,
    HandoffEvent,
    PlanEvent,
    RotationEvent,
    RouteEvent,
    StartEvent,
    TokenEvent,
    ToolEndEvent,
    ToolStartEvent,
    TurnEvent,
    event_to_dict,
)
from sessiongate.errors import InvalidContent
from sessiongate.service.engine import Engine
from sessiongate.service.turns import InboundTurn

router = APIRouter(prefix="/v1")


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: str = Field(max_length=32)
    content: str | list[dict[str, Any]] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="allow")
    include_usage: bool = False


class CompletionRequest(BaseModel):
    # Sampling parameters and the like are accepted and ignored: the agent decides.
    model_config = ConfigDict(extra="allow")
    model: str = Field(min_length=1, max_length=200)
    messages: list[ChatMessage] = Field(min_length=1, max_length=10_000)
    stream: bool = False
    stream_options: StreamOptions | None = None


def _text(message: ChatMessage) -> str:
    if isinstance(message.content, str):
        return message.content
    parts = [p.get("text", "") for p in message.content or [] if p.get("type") == "text"]
    return "".join(str(p) for p in parts)


@router.get("/models")
async def list_models(user: CurrentUser, request: Request) -> dict[str, Any]:
    engine: Engine = request.app.state.engine
    return {
        "object": "list",
        "data": [
            {"id": name, "object": "model", "created": 0, "owned_by": "sessiongate"}
            for name in engine.turns.agents
        ],
    }


@router.post("/chat/completions", response_model=None)
async def chat_completions(
    body: CompletionRequest,
    user: CurrentUser,
    request: Request,
    x_session_key: str | None = Header(None, max_length=200),
) -> Response:
    engine: Engine = request.app.state.engine
    if body.messages[-1].role != "user":
        # The gateway keeps the history: the last message is the new turn and must be one.
        raise InvalidContent("the last message must be the user's new message")
    decision = None
    agent = body.model
    if x_session_key:
        key = x_session_key
    else:
        decision = await routes_of(engine).decide(user, channel="openai")
        key = decision.key
    inbound = InboundTurn(
        key, caller_for(user), _text(body.messages[-1]), agent=agent, route=decision
    )
    handle, first, events = await begin_turn(engine, inbound)
    completion_id = f"chatcmpl-{handle.turn_id}"
    created = int(time.time())
    headers = {"X-Session-Key": key, "X-Session-Id": getattr(first, "session_id", "")}
    if not body.stream:
        result = await collect_reply(handle, [first], events)
        status = reply_status(result)
        if "error" in result:
            error = result["error"]
            return error_response(status, error["code"], error["message"])
        usage = result.get("usage") or {}
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": body.model,
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "stop",
                        "message": {"role": "assistant", "content": result["reply"]},
                    }
                ],
                "usage": usage,
                "session": {
                    "key": key,
                    "session_id": result.get("session_id"),
                    "rotation": result.get("rotation"),
                },
                **(
                    {"sessiongate_tool_steps": result["tool_steps"]}
                    if "tool_steps" in result
                    else {}
                ),
            },
            headers=headers,
        )
    include_usage = bool(body.stream_options and body.stream_options.include_usage)
    return StreamingResponse(
        _chunks(completion_id, created, body.model, events, include_usage),
        media_type="text/event-stream",
        headers={**SSE_HEADERS, **headers},
    )


async def _chunks(
    completion_id: str,
    created: int,
    model: str,
    events: AsyncIterator[TurnEvent],
    include_usage: bool,
) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> bytes:
        data = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return b"data: " + orjson.dumps(data) + b"\n\n"

    yield chunk({"role": "assistant", "content": ""})
    async for event in events:
        match event:
            case TokenEvent():
                yield chunk({"content": event.content})
            case RotationEvent():
                # Clients that know sessiongate read this; others ignore unknown fields.
                yield chunk({}, sessiongate_rotation=event.to_dict())
            case (
                PlanEvent()
                | ToolStartEvent()
                | ToolEndEvent()
                | ContextLogEvent()
                | RouteEvent()
                | ClassificationEvent()
                | ActionEvent()
                | ActionResultEvent()
                | HandoffEvent()
                | AudioEvent()
            ):
                # The agent's own tool steps: text-only clients see nothing; those that
                # know sessiongate read `sessiongate_<event type>`.
                step = {k: v for k, v in event_to_dict(event).items() if k != "type"}
                yield chunk({}, None, **{f"sessiongate_{event.type}": step})
            case EndEvent():
                yield chunk({}, "stop")
                if include_usage:
                    data = {
                        "id": completion_id,
                        "object": "chat.completion.chunk",
                        "created": created,
                        "model": model,
                        "choices": [],
                        "usage": event.usage,
                    }
                    yield b"data: " + orjson.dumps(data) + b"\n\n"
            case ErrorEvent():
                error = {
                    "error": {
                        "code": event.code,
                        "message": event.message,
                        "type": "sessiongate_error",
                    }
                }
                yield b"data: " + orjson.dumps(error) + b"\n\n"
            case StartEvent():
                pass  # the session ids ride in the response headers
            case _:
                assert_never(event)
    yield b"data: [DONE]\n\n"
