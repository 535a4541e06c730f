"""Lifecycle policy: when does a key rotate to a new segment? Pure functions only.

Every function takes the current instant as an argument; none reads a clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from sessiongate.core.segments import RotationReason, Segment, SegmentStatus

NEW_COMMAND = "/new"
_NEW_RE = re.compile(r"\s*/new(?:\s+(?P<rest>.*))?", re.DOTALL)


class LifecycleMode(StrEnum):
    SEGMENTED = "segmented"
    LEGACY = "legacy"


@dataclass(frozen=True, slots=True)
class SemanticPolicy:
    enabled: bool = False
    threshold: float = 0.8
    cooldown: timedelta = timedelta(minutes=10)
    min_messages: int = 4


@dataclass(frozen=True, slots=True)
class LifecyclePolicy:
    mode: LifecycleMode = LifecycleMode.SEGMENTED
    idle_window: timedelta | None = timedelta(hours=12)
    day_boundary: time | None = time(4, 0)
    timezone: ZoneInfo = ZoneInfo("UTC")
    semantic: SemanticPolicy = SemanticPolicy()


class ActionKind(StrEnum):
    ROTATE = "rotate"
    #: Legacy mode only: keep the segment id, start the context afresh.
    CLEAR_IN_PLACE = "clear_in_place"


@dataclass(frozen=True, slots=True)
class LifecycleAction:
    kind: ActionKind
    reason: RotationReason
    confidence: float | None = None
    deciding_model: str | None = None


@dataclass(frozen=True, slots=True)
class NewCommand:
    """A parsed `/new`; `rest` is text that follows it and becomes the first message."""

    rest: str


def parse_new_command(content: str) -> NewCommand | None:
    """`/new` alone, or `/new <text>`. Anything else (`/newer`, `x /new`) is a message."""
    match = _NEW_RE.fullmatch(content)
    if match is None:
        return None
    return NewCommand(rest=(match.group("rest") or "").strip())


def manual_action(policy: LifecyclePolicy) -> LifecycleAction:
    """`/new` always acts: a rotation when segmented, an in-place clear when legacy."""
    return LifecycleAction(_kind_for(policy), RotationReason.MANUAL)


def day_key(instant: datetime, boundary: time, tz: ZoneInfo) -> int:
    """The ordinal of the 'lifecycle day' that `instant` falls in.

    A lifecycle day starts at `boundary` local wall time. Shifting the local wall time back
    by the boundary's offset and taking the calendar date gives a number that increases by
    one each time the wall clock reaches the boundary. This is DST-safe: when the boundary
    falls in a spring-forward gap the day starts at the transition; when it occurs twice in
    a fall-back fold the first occurrence starts the day and the repeat cannot start it
    again, because callers compare with `>` (see `temporal_action`).
    """
    local = instant.astimezone(tz).replace(tzinfo=None)
    offset = timedelta(hours=boundary.hour, minutes=boundary.minute, seconds=boundary.second)
    return (local - offset).toordinal()


def temporal_action(
    segment: Segment, now: datetime, policy: LifecyclePolicy
) -> LifecycleAction | None:
    """Idle expiry or a crossed day boundary, checked before the inbound message lands.

    An empty segment never rotates: there is nothing to move away from. Idle means a gap
    strictly longer than the window; the day boundary is crossed at the exact boundary
    instant. When both hold, `idle` is reported.
    """
    if segment.status is not SegmentStatus.LATEST or segment.active_message_count == 0:
        return None
    kind = _kind_for(policy)
    if policy.idle_window is not None and now - segment.last_activity_at > policy.idle_window:
        return LifecycleAction(kind, RotationReason.IDLE)
    if policy.day_boundary is not None:
        started = day_key(segment.context_started_at, policy.day_boundary, policy.timezone)
        if day_key(now, policy.day_boundary, policy.timezone) > started:
            return LifecycleAction(kind, RotationReason.DAY_BOUNDARY)
    return None


def semantic_eligible(
    segment: Segment,
    now: datetime,
    policy: LifecyclePolicy,
    last_semantic_rotation_at: datetime | None,
) -> bool:
    """Whether asking the control model is worth it at all (saves a model call)."""
    semantic = policy.semantic
    if not semantic.enabled or policy.mode is LifecycleMode.LEGACY:
        return False
    if segment.active_message_count < semantic.min_messages:
        return False
    # A clock that stepped backwards never shortens the cooldown.
    return not (
        last_semantic_rotation_at is not None
        and now - last_semantic_rotation_at < semantic.cooldown
    )


def semantic_action(
    confidence: float,
    deciding_model: str,
    segment: Segment,
    now: datetime,
    policy: LifecyclePolicy,
    last_semantic_rotation_at: datetime | None,
) -> LifecycleAction | None:
    """Rotate only when the judge's confidence strictly exceeds the threshold."""
    if not semantic_eligible(segment, now, policy, last_semantic_rotation_at):
        return None
    if confidence > policy.semantic.threshold:
        return LifecycleAction(
            ActionKind.ROTATE, RotationReason.SEMANTIC, confidence, deciding_model
        )
    return None


def _kind_for(policy: LifecyclePolicy) -> ActionKind:
    if policy.mode is LifecycleMode.LEGACY:
        return ActionKind.CLEAR_IN_PLACE
    return ActionKind.ROTATE
