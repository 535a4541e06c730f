"""Starting a turn from an HTTP request and answering with SSE or one JSON object."""

from __future__ import annotations

from collections.abc import AsyncIterator

from fastapi.responses import JSONResponse, StreamingResponse
from starlette.responses import Response

from sessiongate.api.sse import collect_reply, sse_frame
from sessiongate.core.events import ErrorEvent, TurnEvent
from sessiongate.errors import SessionGateError
from sessiongate.service.engine import Engine
from sessiongate.service.turns import InboundTurn, TurnHandle

#: Status for a turn that failed before it produced anything, by error code; a model
#: failure is the upstream's fault: 502.
_FAILED_TURN_STATUS = {"session_not_found": 404, "latest_moved": 409, "segment_immutable": 409}

SSE_HEADERS = {"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}


def failed_turn_status(code: str) -> int:
    return _FAILED_TURN_STATUS.get(code, 502)


class TurnFailed(SessionGateError):
    """A turn that ended before its `start` event: answered as a plain error response."""

    def __init__(self, event: ErrorEvent) -> None:
        super().__init__(event.message, code=event.code)
        self.status = failed_turn_status(event.code)


async def begin_turn(
    engine: Engine, inbound: InboundTurn
) -> tuple[TurnHandle, TurnEvent, AsyncIterator[TurnEvent]]:
    """Start a turn and wait for its first event, so a failure before the stream begins
    becomes an ordinary error status instead of a 200 with an error event."""
    # The turn checks ownership again under the key's lock; checking first keeps another
    # user's request from ever queueing behind the owner's turns.
    await engine.sessions.check_writable(inbound.key, inbound.caller)
    handle = engine.turns.start_turn(inbound)  # bad input raises here, as a 4xx
    events = handle.events()
    first = await anext(events)
    if isinstance(first, ErrorEvent):
        raise TurnFailed(first)
    return handle, first, events


async def run_http_turn(engine: Engine, inbound: InboundTurn, *, stream: bool) -> Response:
    handle, first, events = await begin_turn(engine, inbound)
    if not stream:
        body = await collect_reply(handle, [first], events)
        if "error" in body:
            return JSONResponse(body, status_code=failed_turn_status(body["error"]["code"]))
        return JSONResponse(body)
    headers = {**SSE_HEADERS, "X-Session-Key": inbound.key}
    return StreamingResponse(
        _frames(first, events, handle), media_type="text/event-stream", headers=headers
    )


async def _frames(
    first: TurnEvent, rest: AsyncIterator[TurnEvent], handle: TurnHandle
) -> AsyncIterator[bytes]:
    yield sse_frame(first)
    async for event in rest:
        # One write for the event and whatever else is already queued behind it.
        yield b"".join([sse_frame(event), *(sse_frame(e) for e in handle.ready())])
