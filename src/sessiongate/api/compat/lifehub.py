"""Seed 002's `POST /chat`: `{messages, provider?}` → a stream of `data: {"type": …}` lines
(`start, plan, tool_start, tool_end, context_log, token, end, error`), as its page reads.

The gateway keeps the history, so only the last user message of `messages` is new; the
turn runs `compat.lifehub_agent` on `compat.lifehub_key` (default `lifehub:{user}`), and
`provider` picks a reply model for this turn through `compat.providers`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.api.turns import SSE_HEADERS, begin_turn
from sessiongate.core.events import TurnEvent, event_to_dict
from sessiongate.errors import InvalidContent, InvalidInput
from sessiongate.service.engine import Engine
from sessiongate.service.turn.pipeline import InboundTurn

router = APIRouter()


class LifeHubMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str = Field(max_length=32)
    content: str


class LifeHubChat(BaseModel):
    model_config = ConfigDict(extra="ignore")
    messages: list[LifeHubMessage] = Field(min_length=1, max_length=10_000)
    provider: str | None = Field(None, max_length=64)


def lifehub_frame(event: TurnEvent) -> bytes:
    return b"data: " + orjson.dumps(event_to_dict(event)) + b"\n\n"


@router.post("/chat", response_model=None)
async def lifehub_chat(body: LifeHubChat, user: CurrentUser, request: Request) -> StreamingResponse:
    engine: Engine = request.app.state.engine
    compat = engine.settings.compat
    last = body.messages[-1]
    if last.role != "user":
        raise InvalidContent("the last message must be the user's new message")
    model = None
    if body.provider is not None:
        model = compat.providers.get(body.provider)
        if model is None:
            known = ", ".join(sorted(compat.providers)) or "none configured"
            raise InvalidInput(
                f"unknown provider {body.provider!r} (known: {known})", code="unknown_provider"
            )
    key = compat.lifehub_key.replace("{user}", user.name)
    inbound = InboundTurn(
        key, caller_for(user), last.content, agent=compat.lifehub_agent, reply_model=model
    )
    handle, first, events = await begin_turn(engine, inbound)

    async def frames() -> AsyncIterator[bytes]:
        yield lifehub_frame(first)
        async for event in events:
            yield b"".join([lifehub_frame(event), *(lifehub_frame(e) for e in handle.ready())])

    headers: dict[str, Any] = {**SSE_HEADERS, "X-Session-Key": key}
    return StreamingResponse(frames(), media_type="text/event-stream", headers=headers)
