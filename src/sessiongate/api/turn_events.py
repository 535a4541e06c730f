"""`GET /v1/turns/{turn_id}/events`: a turn's events again, after a dropped connection.

The client sends the id of the last event it received (`Last-Event-ID: <turn_id>.<n>`, as
a browser's EventSource does on its own, or `?after=n`; the header wins) and gets the
same SSE frames, with the same ids, for every event after it: a running turn continues
live until its last event; a finished one answers what is left and closes.

A turn this process does not hold (it restarted, or another worker ran the turn) is read
from the store and restated from its `start` (service/turn/recovery.py), waiting for its
reply when it is still running elsewhere; `Last-Event-ID` is then ignored.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from fastapi import APIRouter, Request
from fastapi.responses import StreamingResponse

from sessiongate.api.auth import CurrentUser
from sessiongate.api.sse import id_prefix, sse_frame
from sessiongate.api.turns import SSE_HEADERS
from sessiongate.core.events import TurnEvent
from sessiongate.service.engine import Engine
from sessiongate.service.turn.journal import (
    FollowedTurn,
    InvalidLastEventId,
    TurnJournal,
    TurnNotFound,
    check_turn_id,
    parse_last_event_id,
    parse_seq,
)

router = APIRouter(prefix="/v1")


def journal_of(engine: Engine) -> TurnJournal:
    if engine.turn_journal is None:
        raise TurnNotFound("this gateway keeps no turns to resume")
    return engine.turn_journal


def resume_point(turn_id: str, header: str | None, after: str | None) -> int:
    """The seq to resume after: the `Last-Event-ID` header's, else `?after=`, else 0."""
    if header is not None:
        return parse_last_event_id(header, turn_id)
    if after is None:
        return 0
    seq = parse_seq(after)
    if seq is None:
        raise InvalidLastEventId("after must be a non-negative integer (an event's seq)")
    return seq


@router.get("/turns/{turn_id}/events", response_model=None)
async def turn_events(
    turn_id: str, user: CurrentUser, request: Request, after: str | None = None
) -> StreamingResponse:
    check_turn_id(turn_id)
    seq = resume_point(turn_id, request.headers.get("last-event-id"), after)
    turn = await journal_of(request.app.state.engine).locate(turn_id, user.name)
    headers = {**SSE_HEADERS, "X-Session-Key": turn.key}
    return StreamingResponse(_frames(turn, seq), media_type="text/event-stream", headers=headers)


#: A comment line after this long without an event: proxies keep an idle stream open, and
#: a client that left is noticed (the write fails), which ends the wait for its turn.
KEEPALIVE_SECONDS = 15.0
KEEPALIVE = b": waiting\n\n"


async def _frames(
    turn: FollowedTurn, after: int, keepalive: float = KEEPALIVE_SECONDS
) -> AsyncIterator[bytes]:
    prefix = id_prefix(turn.turn_id)
    events = aiter(turn.follow(after))
    pending: asyncio.Task[tuple[int, TurnEvent]] | None = None
    try:
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(events))
            done, _ = await asyncio.wait((pending,), timeout=keepalive)
            if not done:
                yield KEEPALIVE
                continue
            try:
                seq, event = pending.result()
            except StopAsyncIteration:
                return
            pending = None
            yield sse_frame(event, prefix + b"%d" % seq)
    finally:
        if pending is not None and not pending.done():
            pending.cancel()
