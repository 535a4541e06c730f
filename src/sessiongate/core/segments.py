"""Domain records: session keys, segments, messages and rotation records.

These are plain frozen dataclasses. Stores build them; the core reasons over them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from sessiongate.core.keys import KeyRef


class SegmentStatus(StrEnum):
    LATEST = "latest"
    ARCHIVED = "archived"


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    SYSTEM = "system"
    TOOL = "tool"


class MessageStatus(StrEnum):
    COMPLETE = "complete"
    #: The reply stream was cut short (shutdown, cancellation); the partial text is kept.
    INTERRUPTED = "interrupted"


class RotationReason(StrEnum):
    MANUAL = "manual"
    IDLE = "idle"
    DAY_BOUNDARY = "day_boundary"
    SEMANTIC = "semantic"
    REVERT = "revert"
    #: An OpenAI-compatible client re-sent its conversation with an earlier message
    #: edited: the new segment continues the shared part (service/conversation/reconcile.py).
    FORK = "fork"
    #: An item deleted through the Conversations API: the new segment holds the
    #: remaining items (service/conversation_objects.py).
    EDIT = "edit"


#: The created reason of a chain's first segment, which no rotation made (stored as none).
FIRST_SEGMENT = "first"


@dataclass(frozen=True, slots=True)
class Segment:
    session_id: str
    key: KeyRef
    status: SegmentStatus
    created_at: datetime
    archived_at: datetime | None
    #: Segments this one follows in the chain (one for a rotation, two for a revert).
    parent_ids: tuple[str, ...]
    #: Segments whose messages form the start of this one's thread (set by revert only).
    continues: tuple[str, ...]
    #: Legacy-mode in-place clears: context starts after this sequence number.
    cleared_after_seq: int
    #: When the current context began: `created_at`, or the last legacy in-place clear.
    context_started_at: datetime
    message_count: int
    last_activity_at: datetime
    #: The rotation that made this segment; None for a chain's first segment (FIRST).
    created_reason: RotationReason | None

    @property
    def created_reason_name(self) -> str:
        """What made the segment, as the API, the CLI and exports say it: the rotation's
        reason, or `first` for the segment no rotation made."""
        return self.created_reason.value if self.created_reason else FIRST_SEGMENT

    @property
    def active_message_count(self) -> int:
        """Messages in the current context (all of them unless cleared in place)."""
        return self.message_count - self.cleared_after_seq


@dataclass(frozen=True, slots=True)
class Message:
    session_id: str
    seq: int
    role: Role
    content: str
    status: MessageStatus
    created_at: datetime
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def message_id(self) -> str:
        """Stable and unique: the segment id and the position in it."""
        return message_id(self.session_id, self.seq)


def message_id(session_id: str, seq: int) -> str:
    return f"{session_id}:{seq}"


@dataclass(frozen=True, slots=True)
class RotationRecord:
    key: KeyRef
    from_session_id: str
    to_session_id: str
    reason: RotationReason
    at: datetime
    confidence: float | None = None
    deciding_model: str | None = None
    #: True for a legacy-mode clear: no new segment, `from == to`.
    in_place: bool = False


@dataclass(frozen=True, slots=True)
class SessionKeyRecord:
    key: str
    owner: str
    latest_session_id: str
    created_at: datetime
    overrides: dict[str, Any]
    last_semantic_rotation_at: datetime | None
    #: The title its user set (`PATCH /v1/sessions/{key}`); None: the automatic one
    #: (core/titles.py).
    title: str | None = None

    @property
    def ref(self) -> KeyRef:
        return KeyRef(self.owner, self.key)


@dataclass(frozen=True, slots=True)
class KeySummary:
    key: str
    owner: str
    latest_session_id: str
    segment_count: int
    message_count: int
    last_activity_at: datetime
    #: The title set, else the automatic one (core/titles.py); None: no user message yet.
    title: str | None = None


@dataclass(frozen=True, slots=True)
class RecallFragment:
    session_id: str
    message_id: str
    seq: int
    role: Role
    content: str
    score: float
    rationale: str
    created_at: datetime
    #: The key's name (in its owner's namespace) the fragment was found in: with recall
    #: scope "all" it may be another key of the same user (DESIGN.md §13).
    key: str | None = None
    #: Set on the summary of the previous segment a rotation carried over (DESIGN.md §12):
    #: the rotation's reason ("idle", "day_boundary", "semantic"). Such a fragment is
    #: sent as its own system message, not in the block of explicit recalls.
    carried_over: str | None = None
