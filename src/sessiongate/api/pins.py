"""Pins over REST (docs/working_set.md): `POST /v1/sessions/{key}/messages/{message_id}/pin`
keeps a message raw in every context of its segment, `DELETE` lets it go. A message of
another user's key answers exactly as one that never existed (404 `message_not_found`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.api.rest import engine_of
from sessiongate.core.segments import Message
from sessiongate.errors import InvalidInput, NotFound
from sessiongate.service.engine import Engine
from sessiongate.service.sessions import Caller

router = APIRouter(prefix="/v1")

MAX_SEQ = 2**63 - 1


async def find_message(engine: Engine, key: str, caller: Caller, message_id: str) -> Message:
    """The key's message `message_id` (`<session_id>:<seq>`); NotFound otherwise, alike
    for an unknown id and another user's."""
    session_id, _, seq_text = message_id.rpartition(":")
    missing = NotFound(f"no message {message_id!r} under {key!r}", code="message_not_found")
    if not session_id or not seq_text.isdigit() or not 1 <= int(seq_text) <= MAX_SEQ:
        raise missing
    seq = int(seq_text)
    try:
        found = await engine.sessions.messages(key, caller, session_id, after=seq - 1, limit=1)
    except NotFound as exc:
        if exc.code == "session_not_found":
            raise
        raise missing from None
    except InvalidInput:
        raise missing from None
    if not found or found[0].seq != seq:
        raise missing
    return found[0]


def pin_json(message: Message, pinned: bool, changed: bool) -> dict[str, Any]:
    return {
        "message_id": message.message_id,
        "session_id": message.session_id,
        "seq": message.seq,
        "pinned": pinned,
        "changed": changed,
    }


@router.post("/sessions/{key}/messages/{message_id}/pin")
async def pin_message(
    key: str,
    message_id: str,
    user: CurrentUser,
    request: Request,
    agent: Annotated[str | None, Query(max_length=200)] = None,
) -> dict[str, Any]:
    """Pin; 409 `pins_exceed_budget` when the segment's pins alone would not fit the
    budget of the agent (`?agent=`, else the caller's default)."""
    engine = engine_of(request)
    caller = caller_for(user)
    message = await find_message(engine, key, caller, message_id)
    profile = await engine.turns.usable_agent(caller, agent)
    ratio = engine.turns.calibration.ratio(profile.reply_model)
    added = await engine.turns.compactor.pins.pin(message, profile.context_budget, ratio)
    return pin_json(message, True, added)


@router.delete("/sessions/{key}/messages/{message_id}/pin")
async def unpin_message(
    key: str, message_id: str, user: CurrentUser, request: Request
) -> dict[str, Any]:
    engine = engine_of(request)
    message = await find_message(engine, key, caller_for(user), message_id)
    gone = await engine.turns.compactor.pins.unpin(message)
    return pin_json(message, False, gone)
