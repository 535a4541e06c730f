"""Background responses (DESIGN.md §14): `POST /v1/responses` with `background: true`
answers at once with the response `in_progress` (kept), the turn runs on in this process
(its events journalled: `GET …?stream=true` follows it) and its end is kept under the
same id; `POST /v1/responses/{id}/cancel` cancels it (status `cancelled`; an ended one is
answered as it is; one whose process died is ended as failed when read, keeping what its
turn stored: service/responses.py), in whichever process runs it: here at once, else through the
database: the cancel marks the kept body (compare and set, service/responses.py
`request_cancel`) and the process running the response polls its row every
`CANCEL_POLL_SECONDS` while it runs, as several gateways on one PostgreSQL (or
`--workers`) share everything else through the database."""

from __future__ import annotations

import asyncio
import contextlib
import logging
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
from sessiongate.service.responses import CANCEL_REQUESTED, RUNNING, ResponseService, shown
from sessiongate.service.turn.pipeline import TurnHandle

router = APIRouter()
log = logging.getLogger("sessiongate.api")

#: How long a cancel waits for the turn to stop before answering.
CANCEL_WAIT_SECONDS = 10.0
#: How often the process running a background response looks for a cancel asked for
#: in another process.
CANCEL_POLL_SECONDS = 0.25


@dataclass
class Running:
    tasks: dict[str, tuple[asyncio.Task[None], TurnHandle]] = field(default_factory=dict)
    cancelled: set[str] = field(default_factory=set)
    #: The pollers of cancels asked for in other processes, one per running response.
    watchers: set[asyncio.Task[None]] = field(default_factory=set)


async def _watch_cancel(
    service: ResponseService,
    caller: Caller,
    response_id: str,
    task: asyncio.Task[None],
    handle: TurnHandle,
    running: Running,
) -> None:
    """While the response runs here, look for a cancel another process asked for."""
    while not task.done():
        await asyncio.wait({task}, timeout=CANCEL_POLL_SECONDS)
        if task.done():
            return
        try:
            found = await service.get(caller, response_id)
        except Exception:  # a store hiccup: look again at the next poll
            log.warning("background_cancel_poll_failed", extra={"response_id": response_id})
            continue
        if found is not None and found.body.get(CANCEL_REQUESTED):
            running.cancelled.add(response_id)
            if handle.task is not None:
                handle.task.cancel()
            return


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
    await service.record(caller, turn.key, started, turn.items, running_here=True)
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
    watcher = asyncio.get_running_loop().create_task(
        _watch_cancel(service, caller, response_id, task, turn.handle, running)
    )
    running.watchers.add(watcher)
    watcher.add_done_callback(running.watchers.discard)
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
    elif found.body.get("status") in RUNNING:
        # Running in another process (or in one that stopped): ask it through the row,
        # then wait for its end to be kept.
        await service.request_cancel(caller, found)
        deadline = asyncio.get_running_loop().time() + CANCEL_WAIT_SECONDS
        while found.body.get("status") in RUNNING:
            if asyncio.get_running_loop().time() >= deadline:
                break
            await asyncio.sleep(CANCEL_POLL_SECONDS / 2)
            found = await service.get(caller, response_id) or found
    return JSONResponse(shown(found.body))
