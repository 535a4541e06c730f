"""Seed 002's `POST /chat`: `{messages, provider?}` → a stream of `data: {"type": …}` lines
(`start, plan, tool_start, tool_end, context_log, token, end, error`), as its page reads.

The gateway keeps the history, so only the last user message of `messages` is new; the
turn runs `compat.lifehub_agent` on `compat.lifehub_key` (default `lifehub:{user}`), and
`provider` picks a reply model for this turn through `compat.providers`. With no such
table, `provider` changes nothing: the agent's own model answers. Either way the `start`
event says what `provider` did: `"provider": {"requested", "model", "source"}`, `source`
being `compat.providers` or `agent`.

The caller is its API key's user, or `compat.lifehub_user` for seed 002's keyless front
end on this machine (api/compat/loopback.py); a front end on another origin also needs
`[server] cors_origins`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any

import orjson
from fastapi import APIRouter, Depends, Request
from pydantic import BaseModel, ConfigDict, Field

from sessiongate.api.auth import caller_for
from sessiongate.api.compat.loopback import lifehub_user
from sessiongate.api.turn_stream import TurnStream
from sessiongate.api.turns import SSE_HEADERS, begin_turn
from sessiongate.core.events import StartEvent, TurnEvent, event_to_dict
from sessiongate.core.users import User
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


def lifehub_frame(event: TurnEvent, extra: dict[str, Any] | None = None) -> bytes:
    data = event_to_dict(event)
    if extra:
        data.update(extra)
    return b"data: " + orjson.dumps(data) + b"\n\n"


def provider_choice(
    provider: str | None, providers: dict[str, str], agent_model: str
) -> tuple[str | None, dict[str, Any] | None]:
    """The reply model a request's `provider` picks for this turn (None: the agent's
    own) and what the `start` event says about it (None when no provider was named).
    A table that does not list the provider refuses it; no table at all lets the agent's
    model answer."""
    if provider is None:
        return None, None
    if not providers:
        return None, {"requested": provider, "model": agent_model, "source": "agent"}
    model = providers.get(provider)
    if model is None:
        known = ", ".join(sorted(providers))
        raise InvalidInput(
            f"unknown provider {provider!r} (known: {known})", code="unknown_provider"
        )
    return model, {"requested": provider, "model": model, "source": "compat.providers"}


@router.post("/chat", response_model=None)
async def lifehub_chat(
    body: LifeHubChat, user: Annotated[User, Depends(lifehub_user)], request: Request
) -> TurnStream:
    engine: Engine = request.app.state.engine
    compat = engine.settings.compat
    last = body.messages[-1]
    if last.role != "user":
        raise InvalidContent("the last message must be the user's new message")
    agent_model = engine.turns.agent(compat.lifehub_agent).reply_model
    model, said = provider_choice(body.provider, compat.providers, agent_model)
    key = compat.lifehub_key.replace("{user}", user.name)
    inbound = InboundTurn(
        key, caller_for(user), last.content, agent=compat.lifehub_agent, reply_model=model
    )
    handle, first, events = await begin_turn(engine, inbound)
    start_extra = {"provider": said} if said is not None and isinstance(first, StartEvent) else None

    async def frames() -> AsyncIterator[bytes]:
        yield lifehub_frame(first, start_extra)
        async for event in events:
            yield b"".join([lifehub_frame(event), *(lifehub_frame(e) for e in handle.ready())])

    headers: dict[str, Any] = {**SSE_HEADERS, "X-Session-Key": key}
    return TurnStream(frames(), media_type="text/event-stream", headers=headers)
