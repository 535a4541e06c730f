"""Rendering a turn's events as Server-Sent Events, and as one JSON answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson

from sessiongate.core.events import TokenEvent, TurnEvent, event_to_dict
from sessiongate.service.turns import TurnHandle


def sse_frame(event: TurnEvent) -> bytes:
    if isinstance(event, TokenEvent):  # the frame sent most often: no dict to build
        content = orjson.dumps(event.content)
        return b'event: token\ndata: {"content":' + content + b',"type":"token"}\n\n'
    data = orjson.dumps(event_to_dict(event))
    return b"event: " + event.type.encode() + b"\ndata: " + data + b"\n\n"


async def collect_reply(
    handle: TurnHandle, first: list[TurnEvent], rest: AsyncIterator[TurnEvent]
) -> dict[str, Any]:
    """A non-streaming turn: the whole reply in one object (or the error that ended it)."""
    reply: list[str] = []
    result: dict[str, Any] = {"reply": None, "rotation": None, "usage": {}}

    async def all_events() -> AsyncIterator[TurnEvent]:
        for event in first:
            yield event
        async for event in rest:
            yield event

    async for event in all_events():
        data = event_to_dict(event)
        if event.type == "start":
            result.update(
                session_key=data["session_key"],
                session_id=data["session_id"],
                turn_id=data["turn_id"],
            )
        elif event.type == "rotation":
            result["rotation"] = {k: v for k, v in data.items() if k != "type"}
        elif event.type == "token":
            reply.append(data["content"])
        elif event.type == "end":
            result.update(
                reply="".join(reply),
                message_id=data["message_id"],
                message_count=data["message_count"],
                usage=data["usage"],
                status=data["status"],
            )
        elif event.type == "error":
            result["error"] = {"code": data["code"], "message": data["message"]}
            result["error_status"] = data["status"]
    return result


def reply_status(result: dict[str, Any]) -> int:
    """The HTTP status of a collected reply: 200, or the status of the error that ended
    it (which `collect_reply` leaves out of the body it returns)."""
    status = result.pop("error_status", None)
    return 200 if status is None else int(status)
