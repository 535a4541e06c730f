"""Modes: enabled per user by an admin, unlocked for a while by the user (DESIGN.md §8).

Pure rules over records and an injected `now`; the store keeps the records, every unlock
and lock as its own row, so who did what and when is never lost.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum


class ModeState(StrEnum):
    """Whether a request's mode may route, and if not, why (the `route` event's reason)."""

    ACTIVE = "mode_active"
    UNKNOWN = "mode_unknown"
    NOT_ENABLED = "mode_not_enabled"
    LOCKED = "mode_locked"


@dataclass(frozen=True, slots=True)
class ModeUnlock:
    """One unlock of `mode` for `user`: it holds from `unlocked_at` until `expires_at`,
    or until `locked_at` if it was locked earlier."""

    unlock_id: str
    user: str
    mode: str
    unlocked_at: datetime
    expires_at: datetime
    unlocked_by: str
    locked_at: datetime | None = None
    locked_by: str | None = None

    def holds_at(self, now: datetime) -> bool:
        if now < self.unlocked_at or now >= self.expires_at:
            return False
        return self.locked_at is None or now < self.locked_at


def active_unlock(unlocks: Iterable[ModeUnlock], mode: str, now: datetime) -> ModeUnlock | None:
    """The unlock of `mode` holding at `now` that lasts longest, if any."""
    holding = [u for u in unlocks if u.mode == mode and u.holds_at(now)]
    return max(holding, key=lambda u: u.expires_at, default=None)


def mode_state(
    mode: str,
    configured: Iterable[str],
    enabled: Iterable[str],
    unlocks: Iterable[ModeUnlock],
    now: datetime,
) -> ModeState:
    """A mode routes only when configured, enabled for the user and unlocked at `now`."""
    if mode not in set(configured):
        return ModeState.UNKNOWN
    if mode not in set(enabled):
        return ModeState.NOT_ENABLED
    if active_unlock(unlocks, mode, now) is None:
        return ModeState.LOCKED
    return ModeState.ACTIVE


def unlock_expiry(now: datetime, requested: timedelta | None, limit: timedelta) -> datetime:
    """When an unlock asked for at `now` ends: the requested time, never past the mode's
    `unlock_ttl` (the caller refuses a request over the limit before this)."""
    ttl = limit if requested is None else min(requested, limit)
    return now + ttl
