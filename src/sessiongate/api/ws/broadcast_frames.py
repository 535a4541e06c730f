"""The frames the WebSocket broadcast gives the other sockets on a key: the user's
message, copies of the sender's frames, and for a turn no socket relayed live (it ran
elsewhere: REST, the OpenAI-compatible API, another process) the frames rebuilt from
the store once it ended. The shapes are listed in api/ws/broadcast.py."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sessiongate.core.segments import Message, Role

Frame = dict[str, Any]


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def user_message_frame(
    key: str,
    turn_id: str,
    content: str,
    device_id: str | None,
    transport: str | None,
    timestamp: str | None = None,
) -> Frame:
    return {
        "type": "user_message",
        "session_id": key,
        "turn_id": turn_id,
        "content": content,
        "device_id": device_id,
        "transport": transport,
        "timestamp": timestamp or now_iso(),
    }


def broadcast_copy(frame: Frame, key: str, turn_id: str) -> Frame:
    """What the other sockets get for a frame the sender got."""
    copy = {name: value for name, value in frame.items() if name != "frame"}
    copy.setdefault("session_id", key)
    copy["turn_id"] = turn_id
    return copy


def finished_frames(
    key: str, turn_id: str, marker: dict[str, Any], mine: list[Message], count: int
) -> list[Frame]:
    """A finished turn as frames: `user_message`, its `rotation`s, the whole reply as
    one `message`, then `complete` (or `error`). `marker` is what the turn's end
    announced (status, error code, rotations); `mine` its stored messages."""
    user = next((m for m in mine if m.role is Role.USER), None)
    replies = [m for m in mine if m.role is Role.ASSISTANT and m.content]
    reply = replies[-1] if replies else None
    frames: list[Frame] = []
    if user is not None:
        device = user.metadata.get("device_id")
        transport = user.metadata.get("transport")
        frames.append(
            user_message_frame(
                key,
                turn_id,
                user.content,
                device if isinstance(device, str) else None,
                transport if isinstance(transport, str) else None,
                user.created_at.isoformat(),
            )
        )
    extra = {"session_id": key, "turn_id": turn_id}
    for rotation in marker.get("rotations") or ():
        frames.append({"type": "rotation", **rotation, **extra, "timestamp": now_iso()})
    if reply is not None:
        frames.append(
            {"type": "message", "content": reply.content, **extra, "timestamp": now_iso()}
        )
    error = marker.get("error")
    if error:
        message = f"the turn failed ({error})"
        frames.append(
            {
                "type": "error",
                "code": error,
                "content": message,
                "message": message,
                **extra,
                "timestamp": now_iso(),
            }
        )
    else:
        frames.append(
            {
                "type": "complete",
                "content": "Response complete",
                "message_count": mine[-1].seq if mine else count,
                "message_id": reply.message_id if reply is not None else None,
                "status": marker.get("status"),
                **extra,
                "usage": None,
                "timestamp": now_iso(),
            }
        )
    return frames
