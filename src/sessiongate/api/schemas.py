"""Request bodies and response shapes of the v1 JSON API (DESIGN.md §5)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from sessiongate.core.attachments import ImageAttachment, InvalidAttachment, decode_image
from sessiongate.core.context import AssembledContext
from sessiongate.core.segments import Message, RecallFragment, RotationRecord, Segment


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RecallBody(_Body):
    query: str = Field(min_length=1, max_length=2000)
    rationale: str = Field(min_length=1, max_length=2000)
    limit: int = Field(5, ge=1, le=50)
    #: "key": this key's archived segments; "all": every key of the caller (DESIGN.md §13).
    scope: Literal["key", "all"] = "key"


class AttachmentMeta(_Body):
    """Seed 004's screenshot metadata: what the model needs to point at the screen."""

    model_config = ConfigDict(extra="forbid", strict=False)

    width: int | None = Field(None, ge=1, le=100_000)
    height: int | None = Field(None, ge=1, le=100_000)
    #: A grid size (`8`) or a description of it (`"8x6"`).
    grid: int | Annotated[str, Field(max_length=64)] | None = None
    scale: float | None = Field(None, gt=0, le=100)

    def as_dict(self) -> dict[str, Any]:
        return self.model_dump(exclude_none=True)


class AttachmentBody(_Body):
    type: Literal["image"]
    media_type: str = Field(max_length=100)
    #: Base64; its size is checked against limits.max_attachment_bytes.
    data: str
    meta: AttachmentMeta | None = None


class MessageBody(_Body):
    content: str
    stream: bool = True
    agent: str | None = Field(None, max_length=200)
    recall: RecallBody | None = None
    attachments: list[AttachmentBody] | None = Field(None, max_length=16)
    #: Speak the reply: an `audio` event follows `end` (DESIGN.md §9).
    speak: bool = False
    #: The client's id for this message: like an `Idempotency-Key` header (docs/api.md).
    client_message_id: str | None = None


class ChatBody(_Body):
    content: str
    mode: str | None = Field(None, max_length=64)
    channel: str | None = Field(None, max_length=64)
    device_id: str | None = Field(None, max_length=200)
    stream: bool = True
    attachments: list[AttachmentBody] | None = Field(None, max_length=16)
    #: Speak the reply: an `audio` event follows `end` (DESIGN.md §9).
    speak: bool = False
    #: The client's id for this message: like an `Idempotency-Key` header (docs/api.md).
    client_message_id: str | None = None


class LifecycleOverrideBody(_Body):
    idle_window: str | None = None
    day_boundary: str | None = None
    semantic_enabled: bool | None = None
    semantic_threshold: float | None = Field(None, ge=0.0, le=1.0)


class PatchBody(_Body):
    #: The conversation's title (core/titles.py checks it); null: the automatic one.
    title: str | None = None
    control_model: str | None = Field(None, max_length=200)
    reply_model: str | None = Field(None, max_length=200)
    lifecycle: LifecycleOverrideBody | None = None


def decode_attachments(
    bodies: list[AttachmentBody] | None, *, max_count: int, max_bytes: int
) -> tuple[ImageAttachment, ...]:
    """The attachments of a turn body, checked: a 400 or 413 naming the one at fault."""
    if not bodies:
        return ()
    if len(bodies) > max_count:
        raise InvalidAttachment(
            f"a turn may carry at most {max_count} attachments (limits.max_attachments)",
            code="too_many_attachments",
        )
    images = []
    for body in bodies:
        meta = body.meta.as_dict() if body.meta is not None else None
        images.append(decode_image(body.media_type, body.data, meta, max_bytes=max_bytes))
    return tuple(images)


def iso(value: Any) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def segment_json(s: Segment) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "status": s.status.value,
        "created_at": iso(s.created_at),
        "archived_at": iso(s.archived_at),
        "created_reason": s.created_reason_name,
        "parent_ids": list(s.parent_ids),
        "continues": list(s.continues),
        "message_count": s.message_count,
        "last_activity_at": iso(s.last_activity_at),
    }


def rotation_json(r: RotationRecord) -> dict[str, Any]:
    return {
        "from": r.from_session_id,
        "to": r.to_session_id,
        "reason": r.reason.value,
        "at": iso(r.at),
        "confidence": r.confidence,
        "deciding_model": r.deciding_model,
        "in_place": r.in_place,
    }


def message_json(m: Message) -> dict[str, Any]:
    return {
        "message_id": m.message_id,
        "session_id": m.session_id,
        "seq": m.seq,
        "role": m.role.value,
        "content": m.content,
        "status": m.status.value,
        "metadata": m.metadata,
        "created_at": iso(m.created_at),
    }


def fragment_json(f: RecallFragment) -> dict[str, Any]:
    return {
        "key": f.key,
        "session_id": f.session_id,
        "message_id": f.message_id,
        "seq": f.seq,
        "role": f.role.value,
        "content": f.content,
        "score": f.score,
        "rationale": f.rationale,
        "created_at": iso(f.created_at),
    }


def context_json(
    session_id: str, ctx: AssembledContext, pinned: Sequence[str] = ()
) -> dict[str, Any]:
    """`pinned`: the message ids pinned in the segment, oldest first
    (docs/working_set.md)."""
    pins = set(pinned)
    return {
        "session_id": session_id,
        "messages": [
            {"role": m.role, "content": m.content, "source": m.source, "pinned": m.source in pins}
            for m in ctx.messages
        ],
        "token_estimate": ctx.token_estimate,
        "dropped_messages": ctx.dropped_messages,
        "recall": list(ctx.recall),
        # The memory block's items and why (`{memory_id, reason, score}`; docs/memory.md).
        "memory": list(ctx.memory),
        "pinned": list(pinned),
    }
