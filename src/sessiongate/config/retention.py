"""Configuration of retention: what happens to session keys nobody has used for a while
(seed 001 cleans up sessions idle more than 30 days). The gateway applies it on a
schedule and `sessiongate gc` on demand (service/retention.py, docs/operations.md)."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import Field, field_validator

from sessiongate.config.base import Duration, OptionalDuration, Section

#: Shorter than this is almost certainly a typo (`30m` for `30d`), and with
#: `action = "erase"` a typo there erases live conversations.
MIN_IDLE_AFTER = timedelta(hours=1)


class RetentionConfig(Section):
    #: A key whose latest activity is older than this is archived or erased. Unset or
    #: `off`: retention is disabled (the default).
    idle_after: OptionalDuration = None
    #: `archive`: the key's latest segment is archived (its messages stay, immutable,
    #: for recall and export; the next message starts an empty segment). `erase`: the key
    #: goes with everything derived from it, as `DELETE /v1/sessions/{key}` does.
    action: Literal["archive", "erase"] = "archive"
    #: How often the gateway runs it (first run at start-up).
    interval: Duration = timedelta(hours=1)
    #: The most keys one run handles; the next run goes on with the rest.
    max_keys_per_run: int = Field(10_000, ge=1, le=1_000_000)

    @field_validator("idle_after")
    @classmethod
    def _long_enough(cls, value: timedelta | None) -> timedelta | None:
        if value is not None and value < MIN_IDLE_AFTER:
            raise ValueError("must be at least 1h (or off)")
        return value

    @field_validator("interval")
    @classmethod
    def _interval(cls, value: timedelta) -> timedelta:
        if not timedelta(seconds=1) <= value <= timedelta(days=7):
            raise ValueError("must be between 1s and 7d")
        return value
