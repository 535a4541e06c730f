"""The WebSocket protocol's frame shapes: a turn event as a frame, an error frame, and the
history a `ready` frame carries. Pure: no socket here."""

from __future__ import annotations

from typing import Any, assert_never

from sessiongate.api.ws.broadcast_frames import now_iso
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
from sessiongate.core.segments import Message


def event_id(turn_id: str, seq: int) -> str:
    """A turn frame's `event_id`: `<turn_id>.<seq>`, the same as the SSE `id` of that
    event; a client resumes after it with a `resume` frame."""
    return f"{turn_id}.{seq}"


def render(event: TurnEvent, key: str) -> dict[str, Any] | None:
    """A turn event in this protocol's wire form (None: not sent on this protocol)."""
    match event:
        case TokenEvent():
            return {"type": "message", "content": event.content, "timestamp": now_iso()}
        case RotationEvent():
            return {**event.to_dict(), "timestamp": now_iso()}
        case EndEvent():
            return {
                "type": "complete",
                "content": "Response complete",
                "message_count": event.message_count,
                "message_id": event.message_id,
                "status": event.status,
                "session_id": key,
                "usage": event.usage,
                "timestamp": now_iso(),
            }
        case ErrorEvent():
            return error_frame(event.code, event.message)
        case (
            ContextLogEvent()
            | CompactionEvent()
            | MemoryEvent()
            | ContextTrimmedEvent()
            | PlanEvent()
            | ToolStartEvent()
            | ToolEndEvent()
            | RouteEvent()
            | ClassificationEvent()
            | ActionEvent()
            | ActionResultEvent()
            | HandoffEvent()
            | AudioEvent()
            | AudioPartEvent()
        ):
            # The agent runtime's steps, in the same shape as on SSE.
            return {**event_to_dict(event), "timestamp": now_iso()}
        case StartEvent():
            return None  # seed 001's protocol has no start frame
        case ReasoningEvent():
            return None  # only the Responses API asks for reasoning
        case _:
            assert_never(event)


def error_frame(
    code: str, message: str, frame_number: int | None = None, retry_after: int | None = None
) -> dict[str, Any]:
    """An error frame; `retry_after`: the seconds a refusal over a quota asks the client to
    wait (the HTTP answer's `Retry-After`)."""
    frame: dict[str, Any] = {
        "type": "error",
        "code": code,
        "content": message,
        "message": message,
        "timestamp": now_iso(),
    }
    if frame_number is not None:
        frame["frame"] = frame_number  # which client frame this answers, counted from 1
    if retry_after is not None:
        frame["retry_after"] = retry_after
    return frame


def history_within(messages: list[Message], budget: int) -> tuple[list[dict[str, Any]], bool]:
    """The newest messages whose content fits in `budget` bytes, oldest first, and whether
    that is all of them. A single message larger than the budget is cut to it (marked)."""
    kept: list[dict[str, Any]] = []
    used = 0
    for message in reversed(messages):
        size = len(message.content.encode("utf-8")) + 200
        content = message.content
        cut = False
        if used + size > budget:
            if kept:
                break
            content = message.content[: max(budget - 200, 0) // 4]  # ≤ 4 bytes per char
            cut = True
            size = budget
        entry: dict[str, Any] = {
            "role": message.role.value,
            "content": content,
            "timestamp": message.created_at.isoformat(),
            "status": message.status.value,
            "message_id": message.message_id,
        }
        if cut:
            entry["content_truncated"] = True
        kept.append(entry)
        used += size
    kept.reverse()
    return kept, len(kept) == len(messages) and not any("content_truncated" in e for e in kept)
