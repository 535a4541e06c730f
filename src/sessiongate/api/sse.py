"""Rendering a turn's events as Server-Sent Events, and as one JSON answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, assert_never

import orjson

from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    AudioEvent,
    AudioPartEvent,
    ClassificationEvent,
    CompactionEvent,
    ContextLogEvent,
    ContextTrimmedEvent,
    EndEvent,
    ErrorEvent,
    HandoffEvent,
    MemoryEvent,
    PlanEvent,
    ReasoningEvent,
    RotationEvent,
    RouteEvent,
    StartEvent,
    TokenEvent,
    ToolEndEvent,
    ToolStartEvent,
    TurnEvent,
    event_to_dict,
)
from sessiongate.service.turn.pipeline import TurnHandle


def sse_frame(event: TurnEvent, sse_id: bytes = b"") -> bytes:
    """One event; with `sse_id` (`<turn_id>.<seq>`, see `id_prefix`) an `id:` line too,
    which a client sends back as `Last-Event-ID` to resume after it."""
    if isinstance(event, TokenEvent):  # the frame sent most often: no dict to build
        content = orjson.dumps(event.content)
        if not sse_id:
            return b'event: token\ndata: {"content":' + content + b',"type":"token"}\n\n'
        return b"".join(
            (
                b"event: token\nid: ",
                sse_id,
                b'\ndata: {"content":',
                content,
                b',"type":"token"}\n\n',
            )
        )
    data = orjson.dumps(event_to_dict(event))
    id_line = b"id: " + sse_id + b"\n" if sse_id else b""
    return b"event: " + event.type.encode() + b"\n" + id_line + b"data: " + data + b"\n\n"


def id_prefix(turn_id: str) -> bytes:
    """What the SSE id of each of the turn's events starts with: the id of its `seq`-th
    event (`start` is 1) is `id_prefix(turn_id) + b"%d" % seq`."""
    return turn_id.encode() + b"."


async def collect_reply(
    handle: TurnHandle, first: list[TurnEvent], rest: AsyncIterator[TurnEvent]
) -> dict[str, Any]:
    """A non-streaming turn: the whole reply in one object (or the error that ended it)."""
    reply: list[str] = []
    steps: list[dict[str, Any]] = []
    result: dict[str, Any] = {"reply": None, "rotation": None, "usage": {}}

    async def all_events() -> AsyncIterator[TurnEvent]:
        for event in first:
            yield event
        async for event in rest:
            yield event

    async for event in all_events():
        match event:
            case StartEvent():
                result.update(
                    session_key=event.session_key,
                    session_id=event.session_id,
                    turn_id=event.turn_id,
                )
            case RotationEvent():
                result["rotation"] = {k: v for k, v in event.to_dict().items() if k != "type"}
            case TokenEvent():
                reply.append(event.content)
            case PlanEvent():
                result["plan"] = event.plan
            case ToolStartEvent():
                steps.append({"call_id": event.call_id, "name": event.name, "input": event.input})
            case ToolEndEvent():
                for step in steps:
                    if step["call_id"] == event.call_id:
                        step.update(output=event.output, status=event.status)
                        step["duration_ms"] = event.duration_ms
            case ContextLogEvent():
                result["context_log"] = event.log
            case CompactionEvent() | ContextTrimmedEvent():
                fields = {k: v for k, v in event_to_dict(event).items() if k != "type"}
                result.setdefault(event.type, []).append(fields)
            case MemoryEvent():
                result.setdefault("memory", []).extend(event.changes)
            case RouteEvent() | ClassificationEvent() | ActionResultEvent():
                fields = event_to_dict(event)
                kind = {"action_result": "action"}.get(str(fields.pop("type")), event.type)
                result[kind] = fields
            case ActionEvent():
                result["action"] = {"language": event.language, "script": event.script}
            case HandoffEvent():
                result.setdefault("handoffs", []).append(
                    {k: v for k, v in event_to_dict(event).items() if k != "type"}
                )
            case AudioEvent():
                result["audio"] = {k: v for k, v in event_to_dict(event).items() if k != "type"}
            case AudioPartEvent():
                pass  # streaming only: the final `audio` carries the whole reply
            case ReasoningEvent():
                pass  # only the Responses API asks for reasoning
            case EndEvent():
                result.update(
                    reply="".join(reply),
                    message_id=event.message_id,
                    message_count=event.message_count,
                    usage=event.usage,
                    status=event.status,
                )
            case ErrorEvent():
                result["error"] = {"code": event.code, "message": event.message}
                result["error_status"] = event.status
            case _:
                assert_never(event)
    if steps:
        result["tool_steps"] = steps
    return result


def reply_status(result: dict[str, Any]) -> int:
    """The HTTP status of a collected reply: 200, or the status of the error that ended
    it (which `collect_reply` leaves out of the body it returns)."""
    status = result.pop("error_status", None)
    return 200 if status is None else int(status)
