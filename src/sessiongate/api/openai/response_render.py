"""A Responses API turn on the wire (DESIGN.md §14): OpenAI's error shape
(`{"error": {"message", "type", "code", "param"}}`), the turn's events as the streamed
`response.*` events (core/response_events.py) or as one `response` object."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import orjson
from fastapi.responses import JSONResponse

from sessiongate.api.openai.response_journal import JournalEntry
from sessiongate.core.conversation import render_notice
from sessiongate.core.events import (
    EndEvent,
    ErrorEvent,
    ReasoningEvent,
    RotationEvent,
    TokenEvent,
    ToolEndEvent,
    ToolStartEvent,
    TurnEvent,
)
from sessiongate.core.response_events import ResponseEvents, ResponseShell, replay

#: What runs with the finished response object (keeping it), before it is sent.
OnDone = Callable[[dict[str, Any]], Awaitable[None]]


class OpenAIError(Exception):
    """An error answered in OpenAI's shape and status."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str | None,
        param: str | None = None,
        kind: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.code = code
        self.param = param
        self.kind = kind

    def response(self) -> JSONResponse:
        return openai_error(self.status, self.message, self.code, self.param, self.kind)


def openai_error(
    status: int,
    message: str,
    code: str | None,
    param: str | None = None,
    kind: str | None = None,
) -> JSONResponse:
    if kind is None:
        kind = "invalid_request_error" if status < 500 else "server_error"
    error = {"message": message, "type": kind, "code": code, "param": param}
    return JSONResponse({"error": error}, status_code=status)


def not_found(what: str, ident: str) -> OpenAIError:
    """An unknown id, and another user's, answer exactly alike. OpenAI leaves `code` null
    here; ours names it (`response_not_found`, …), as every error of the gateway does."""
    shown = ident[:100]
    code = f"{what.lower()}_not_found"
    return OpenAIError(404, f"{what} with id '{shown}' not found.", code, None)


def page_params(limit: str, order: str) -> int:
    """A list's `limit` (1-100) and `order` (asc, desc) checked; the limit."""
    if order not in ("asc", "desc"):
        raise OpenAIError(400, "order must be asc or desc.", "invalid_value", "order")
    if not limit.isdigit() or not 1 <= int(limit) <= 100:
        raise OpenAIError(400, "limit must be between 1 and 100.", "invalid_value", "limit")
    return int(limit)


def sse(event: dict[str, Any]) -> bytes:
    kind = str(event["type"]).encode()
    return b"event: " + kind + b"\ndata: " + orjson.dumps(event) + b"\n\n"


async def _every(first: TurnEvent, events: AsyncIterator[TurnEvent]) -> AsyncIterator[TurnEvent]:
    yield first
    async for event in events:
        yield event


async def response_events(
    shell: ResponseShell,
    first: TurnEvent,
    events: AsyncIterator[TurnEvent],
    tool_calls: Callable[[], list[dict[str, str]]],
    notice_template: str,
    on_done: OnDone,
) -> AsyncIterator[dict[str, Any]]:
    """The turn's events as the Responses API's, ending with the whole response (after
    `on_done` ran with it). A rotation's notice is the first text of the answer, as on
    chat completions (what a client re-sends matches what is stored)."""
    numbered = ResponseEvents(shell)
    for event in numbered.opening():
        yield event
    async for turn_event in _every(first, events):
        closing: list[dict[str, Any]] = []
        response: dict[str, Any] | None = None
        match turn_event:
            case TokenEvent():
                for event in numbered.delta(turn_event.content):
                    yield event
            case ReasoningEvent():
                for event in numbered.reasoning(turn_event.content, turn_event.signature):
                    yield event
            case ToolStartEvent():  # a hosted tool's equivalent (agents/runners/hosted.py)
                started = numbered.hosted_start(
                    turn_event.call_id, turn_event.name, turn_event.input
                )
                for event in started:
                    yield event
            case ToolEndEvent():
                for event in numbered.hosted_end(turn_event.call_id, turn_event.status):
                    yield event
            case RotationEvent():
                notice = render_notice(notice_template, str(turn_event.reason))
                for event in numbered.delta(notice):
                    yield event
            case EndEvent():
                usage = turn_event.usage
                closing, response = numbered.end(tool_calls(), usage, turn_event.status)
            case ErrorEvent():
                closing, response = numbered.failure(turn_event.code, turn_event.message)
            case _:
                pass  # the agent's own steps, classification, audio: not on this wire
        if response is not None:
            await on_done(response)
            for event in closing:
                yield event
            return


async def pump(
    shell: ResponseShell,
    first: TurnEvent,
    events: AsyncIterator[TurnEvent],
    tool_calls: Callable[[], list[dict[str, str]]],
    notice_template: str,
    on_done: OnDone,
    entry: JournalEntry,
) -> None:
    """The turn's events, as the Responses API's, into the response's journal entry: run
    as a task of its own, so a response ends (and is kept) whoever reads it."""
    try:
        async for event in response_events(
            shell, first, events, tool_calls, notice_template, on_done
        ):
            entry.add(event)
    finally:
        entry.close()


def final_response(entry: JournalEntry) -> dict[str, Any]:
    """The response a finished entry ended with (failed when its stream broke off)."""
    for event in reversed(entry.events):
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            response: dict[str, Any] = event["response"]
            return response
    return {"status": "failed", "error": {"code": "interrupted", "message": "no response"}}


async def sse_of(events: AsyncIterator[dict[str, Any]]) -> AsyncIterator[bytes]:
    async for event in events:
        yield sse(event)


def replayed(body: dict[str, Any]) -> list[dict[str, Any]]:
    """A kept response's events again (an `Idempotency-Key` repeated): its text as one
    delta, its calls, the response as it was kept."""
    return replay(body)
