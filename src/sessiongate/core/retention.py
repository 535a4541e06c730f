"""Retention: what happens to a key nobody has used for `idle_after`. Pure rules; the
instant is passed in.

A key's last activity is its latest segment's `last_activity_at` (every message lands in
the latest segment, and a rotation starts the new one at the rotation's instant). A key is
idle when that is strictly older than `now - idle_after`.

- `erase`: the key goes, with everything derived from it (service/retention.py).
- `archive`: the latest segment is archived by an ordinary rotation (reason `idle`,
  deciding model `retention`; an in-place clear in legacy mode), so the conversation
  stays — immutable, recallable, exportable — and the next message starts an empty
  segment. A key whose latest segment has nothing in its context is already archived:
  nothing happens, so archiving is idempotent and never piles up empty segments.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from sessiongate.core.rotation import LifecycleAction, LifecyclePolicy, manual_action
from sessiongate.core.segments import RotationReason, Segment

#: The `deciding_model` recorded on a rotation retention made.
RETENTION_DECIDER = "retention"


class RetentionAction(StrEnum):
    ARCHIVE = "archive"
    ERASE = "erase"


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    idle_after: timedelta
    action: RetentionAction

    def cutoff(self, now: datetime) -> datetime:
        """Keys whose last activity is before this instant are idle."""
        return now - self.idle_after


class Skip(StrEnum):
    """Why an idle candidate was left alone when its turn came."""

    #: Used again since it was found idle.
    ACTIVE = "active"
    #: Archive only: its latest segment holds no context (already archived).
    EMPTY = "empty"


Decision = LifecycleAction | RetentionAction | Skip


def has_context(latest: Segment) -> bool:
    """Whether the next turn would see earlier messages: the segment's own (after any
    in-place clear), or those of the segments a revert continuation continues."""
    return latest.active_message_count > 0 or bool(latest.continues)


def decide(
    latest: Segment, now: datetime, policy: RetentionPolicy, lifecycle: LifecyclePolicy
) -> Decision:
    """What retention does to a key whose latest segment is `latest`: `ERASE`, a
    LifecycleAction to apply (archive), or why it is skipped."""
    if latest.last_activity_at >= policy.cutoff(now):
        return Skip.ACTIVE
    if policy.action is RetentionAction.ERASE:
        return RetentionAction.ERASE
    if not has_context(latest):
        return Skip.EMPTY
    kind = manual_action(lifecycle).kind  # rotate, or clear in place in legacy mode
    return LifecycleAction(kind, RotationReason.IDLE, deciding_model=RETENTION_DECIDER)
