"""Background responses (DESIGN.md §14): `POST /v1/responses` with `background: true`
answers at once with the response `in_progress` (kept), the turn runs on in this process
(its events journalled: `GET …?stream=true` follows it) and its end is kept under the
same id; `POST /v1/responses/{id}/cancel` cancels it while
it runs here (status `cancelled`; an ended one is answered as it is)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse

from sessiongate.api.auth import CurrentUser, caller_for
from sessiongate.api.openai.response_journal import JournalEntry, journal_of
from sessiongate.api.openai.response_render import not_found, openai_error, pump, sse_of
from sessiongate.api.turns import SSE_HEADERS
from sessiongate.core.events import TurnEvent
from sessiongate.core.response_events import ResponseShell
from sessiongate.core.users import Caller
from sessiongate.service.responses import ResponseService
from sessiongate.service.turn.pipeline import TurnHandle

router = APIRouter()

#: How long a cancel waits for the turn to stop before answering.
CANCEL_WAIT_SECONDS = 10.0


@dataclass
class Running:
    tasks: dict[str, tuple[asyncio.Task[None], TurnHandle]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)


def running_of(request: Request) -> Running:
    state = request.app.state
    found: Running | None = getattr(state, "background_responses", None)
    if found is None:
        found = Running()
        state.background_responses = found
    return found


@dataclass(frozen=True, slots=True)
class BackgroundTurn:
    shell: ResponseShell
    key: str
    items: list[dict[str, Any]]
    handle: TurnHandle
    first: TurnEvent
    events: AsyncIterator[TurnEvent]
    calls: Callable[[], list[dict[str, str]]]
    notice: str
    entry: JournalEntry


async def start_background(
    request: Request,
    service: ResponseService,
    caller: Caller,
    turn: BackgroundTurn,
    headers: dict[str, str],
    *,
    stream: bool = False,
) -> Response:
    """Keep the response `in_progress`, run the turn on, keep its end."""
    response_id = turn.shell.response_id
    started = {**turn.shell.response("in_progress"), "background": True}
    await service.record(caller, turn.key, started, turn.items)
    running = running_of(request)

    async def on_done(response: dict[str, Any]) -> None:
        ended = {**response, "background": True}
        if response_id in running.cancelled and ended["status"] == "failed":
            ended.update(status="cancelled", error=None)
        await service.record(caller, turn.key, ended, turn.items)

    task = journal_of(request).run(
        pump(turn.shell, turn.first, turn.events, turn.calls, turn.notice, on_done, turn.entry)
    )
    running.tasks[response_id] = (task, turn.handle)
    task.add_done_callback(lambda _: running.tasks.pop(response_id, None))
    if stream:  # followed from its journal: a dropped stream leaves it running
        events = sse_of(turn.entry.follow(-1))
        return StreamingResponse(
            events, media_type="text/event-stream", headers={**SSE_HEADERS, **headers}
        )
    return JSONResponse(started, headers=headers)


@router.post("/responses/{response_id}/cancel", response_model=None)
async def cancel_response(response_id: str, user: CurrentUser, request: Request) -> Response:
    from sessiongate.api.openai.responses import responses_of

    caller = caller_for(user)
    service = responses_of(request)
    found = await service.get(caller, response_id)
    if found is None:
        return not_found("Response", response_id).response()
    if not found.body.get("background"):
        message = "Only responses created with background can be cancelled."
        return openai_error(400, message, None, "response_id")
    running = running_of(request)
    entry = running.tasks.get(response_id)
    if entry is not None:
        task, handle = entry
        running.cancelled.add(response_id)
        if handle.task is not None:
            handle.task.cancel()
        with contextlib.suppress(asyncio.CancelledError, TimeoutError, Exception):
            await asyncio.wait_for(asyncio.shield(task), CANCEL_WAIT_SECONDS)
        found = await service.get(caller, response_id) or found
    return JSONResponse(found.body)
