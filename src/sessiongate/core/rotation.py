"""Lifecycle policy: when does a key rotate to a new segment? Pure functions only.

Every function takes the current instant as an argument; none reads a clock.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo

from sessiongate.core.segments import RotationReason, Segment, SegmentStatus

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

    A lifecycle day starts when the local wall clock reaches `boundary`. Shifting the
    wall time back by the boundary's offset and taking the calendar date gives a number
    that grows by one at each boundary. It is DST-safe: a boundary inside a
    spring-forward gap starts the day at the transition, and inside a fall-back overlap
    the repeated hour reads as the highest wall time already reached, so a boundary there
    starts the day at its first occurrence and cannot start it again.
    """
    offset = timedelta(hours=boundary.hour, minutes=boundary.minute, seconds=boundary.second)
    return (_monotonic_wall_time(instant, tz) - offset).toordinal()


def _monotonic_wall_time(instant: datetime, tz: ZoneInfo) -> datetime:
    """Local wall time, except that during the second pass of a fall-back overlap it stays
    just below the wall time at which the clocks went back."""
    local = instant.astimezone(tz)
    wall = local.replace(tzinfo=None, fold=0)
    if not local.fold:
        return wall
    earlier, later = local.replace(fold=0).utcoffset(), local.utcoffset()
    if earlier is None or later is None or earlier <= later:
        return wall
    # Find the transition (tz data changes offsets on whole seconds) between the first
    # occurrence of this wall time and now.
    lo = int((instant - (earlier - later)).timestamp())
    hi = int(instant.timestamp())
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if datetime.fromtimestamp(mid, tz).utcoffset() == earlier:
            lo = mid
        else:
            hi = mid
    went_back_at = datetime.fromtimestamp(hi, UTC).replace(tzinfo=None) + earlier
    return went_back_at - timedelta(microseconds=1)


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
