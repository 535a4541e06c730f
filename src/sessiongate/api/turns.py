"""Starting a turn from an HTTP request and answering with SSE or one JSON object."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import replace

from fastapi.responses import JSONResponse
from starlette.responses import Response

from sessiongate.api.sse import collect_reply, id_prefix, reply_status, sse_frame
from sessiongate.api.turn_stream import TurnStream
from sessiongate.core.events import ErrorEvent, TurnEvent
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.idempotency import IdempotentRequest, RepeatedTurn, ReplayedTurn
from sessiongate.service.turn.journal import seq_after
from sessiongate.service.turn.pipeline import InboundTurn, TurnHandle

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


class TurnFailed(SessionGateError):
    """A turn that ended before its `start` event: answered as a plain error response."""

    def __init__(self, event: ErrorEvent) -> None:
        super().__init__(event.message, code=event.code)
        self.status = event.status


async def begin_turn(
    engine: Engine, inbound: InboundTurn, idempotent: IdempotentRequest | None = None
) -> tuple[TurnHandle, TurnEvent, AsyncIterator[TurnEvent]]:
    """Start a turn and wait for its first event, so a failure before the stream begins
    becomes an ordinary error status instead of a 200 with an error event. With an
    idempotency key, the turn that key already started is joined or replayed instead."""
    if idempotent is not None and engine.idempotency is not None:
        # Counted against the quotas only when the turn starts here: a replay or a join
        # of the turn this key started runs nothing.
        inbound = await engine.turns.admit(inbound, count=False)  # not allowed: 403

        async def count() -> None:
            nonlocal inbound
            inbound = await engine.turns.admit(inbound)  # over a quota: 429

        handle = await engine.idempotency.run(
            idempotent,
            lambda resumed: engine.turns.start_turn(replace(inbound, resumes=resumed)),
            count,
        )
    else:
        inbound = await engine.turns.admit(inbound)  # an agent the caller may not run: 403
        handle = engine.turns.start_turn(inbound)  # bad input raises here, as a 4xx
    events = handle.events()
    first = await anext(events)
    # The turn went on past `start` without yielding, up to its upstream request: aiohttp
    # (before Python 3.12) writes it from a task of its own, queued behind this one. Yield once so
    # the request leaves before the response (headers, first frame) is started here;
    # otherwise the model waits for that work (~0.5 ms) before it can begin.
    await asyncio.sleep(0)
    if isinstance(first, ErrorEvent):
        raise TurnFailed(first)
    return handle, first, events


async def run_http_turn(
    engine: Engine,
    inbound: InboundTurn,
    *,
    stream: bool,
    idempotent: IdempotentRequest | None = None,
    last_event_id: str | None = None,
) -> Response:
    """The turn as SSE (each event with its `id: <turn_id>.<seq>`) or one JSON object.
    `last_event_id` is the request's `Last-Event-ID` header: when the request joined its
    turn while it runs (a retry with the same `Idempotency-Key`), the events up to that
    one are not sent again; ids keep the turn's own seqs."""
    handle, first, events = await begin_turn(engine, inbound, idempotent)
    if not stream:
        body = await collect_reply(handle, [first], events)
        return JSONResponse(body, status_code=reply_status(body))
    after = 0
    # A replayed turn (it had ended) is a short stream of its own: sent whole, from its
    # `start`, so the client redraws the turn.
    if isinstance(handle, RepeatedTurn) and not isinstance(handle, ReplayedTurn):
        after = seq_after(last_event_id, handle.turn_id) or 0
    headers = {**SSE_HEADERS, "X-Session-Key": inbound.key}
    return TurnStream(
        _frames(first, events, handle, after), media_type="text/event-stream", headers=headers
    )


async def _frames(
    first: TurnEvent, rest: AsyncIterator[TurnEvent], handle: TurnHandle, after: int
) -> AsyncIterator[bytes]:
    prefix = id_prefix(handle.turn_id)
    seq = 1
    if seq > after:
        yield sse_frame(first, prefix + b"1")
    async for event in rest:
        # One write for the event and whatever else is already queued behind it.
        frames: list[bytes] = []
        for queued in (event, *handle.ready()):
            seq += 1
            if seq > after:
                frames.append(sse_frame(queued, prefix + b"%d" % seq))
        if frames:
            yield b"".join(frames)
