"""Request bodies and response shapes of the v1 JSON API (DESIGN.md §5)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sessiongate.core.context import AssembledContext
from sessiongate.core.segments import Message, RecallFragment, RotationRecord, Segment


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


class RecallBody(_Body):
    query: str = Field(min_length=1, max_length=2000)
    rationale: str = Field(min_length=1, max_length=2000)
    limit: int = Field(5, ge=1, le=50)


class MessageBody(_Body):
    content: str
    stream: bool = True
    agent: str | None = Field(None, max_length=200)
    recall: RecallBody | None = None
    attachments: list[dict[str, Any]] | None = Field(None, max_length=0)


class ChatBody(_Body):
    content: str
    mode: str | None = Field(None, max_length=64)
    channel: str | None = Field(None, max_length=64)
    device_id: str | None = Field(None, max_length=200)
    stream: bool = True


class LifecycleOverrideBody(_Body):
    idle_window: str | None = None
    day_boundary: str | None = None
    semantic_enabled: bool | None = None
    semantic_threshold: float | None = Field(None, ge=0.0, le=1.0)


class PatchBody(_Body):
    control_model: str | None = Field(None, max_length=200)
    reply_model: str | None = Field(None, max_length=200)
    lifecycle: LifecycleOverrideBody | None = None


def iso(value: Any) -> str | None:
    return None if value is None else value.isoformat().replace("+00:00", "Z")


def segment_json(s: Segment) -> dict[str, Any]:
    return {
        "session_id": s.session_id,
        "status": s.status.value,
        "created_at": iso(s.created_at),
        "archived_at": iso(s.archived_at),
        "created_reason": s.created_reason.value if s.created_reason else None,
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
        "session_id": f.session_id,
        "message_id": f.message_id,
        "seq": f.seq,
        "role": f.role.value,
        "content": f.content,
        "score": f.score,
        "rationale": f.rationale,
        "created_at": iso(f.created_at),
    }


def context_json(session_id: str, ctx: AssembledContext) -> dict[str, Any]:
    return {
        "session_id": session_id,
        "messages": [
            {"role": m.role, "content": m.content, "source": m.source} for m in ctx.messages
        ],
        "token_estimate": ctx.token_estimate,
        "dropped_messages": ctx.dropped_messages,
        "recall": list(ctx.recall),
    }
