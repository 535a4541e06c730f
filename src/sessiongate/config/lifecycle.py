"""Configuration of the session lifecycle (`[lifecycle]`, DESIGN.md §2): segmented or
legacy mode, idle and daily rollover, semantic rollover; read into the core's
`LifecyclePolicy`. Also how a day boundary and a timezone name are read."""

from __future__ import annotations

import os
from datetime import time, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator

from sessiongate.config.base import Duration, OptionalDuration, Section
from sessiongate.core.rotation import LifecycleMode, LifecyclePolicy, SemanticPolicy


class SemanticConfig(Section):
    enabled: bool = False
    threshold: float = Field(0.8, ge=0.0, le=1.0)
    cooldown: Duration = timedelta(minutes=10)
    min_messages: int = Field(4, ge=0)


class LifecycleConfig(Section):
    mode: LifecycleMode = LifecycleMode.SEGMENTED
    idle_window: OptionalDuration = timedelta(hours=12)
    day_boundary: str = "04:00"
    timezone: str = "local"
    semantic: SemanticConfig = SemanticConfig()

    @field_validator("day_boundary")
    @classmethod
    def _check_boundary(cls, value: str) -> str:
        parse_day_boundary(value)
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str) -> str:
        resolve_timezone(value)
        return value

    def policy(self) -> LifecyclePolicy:
        return LifecyclePolicy(
            mode=self.mode,
            idle_window=self.idle_window,
            day_boundary=parse_day_boundary(self.day_boundary),
            timezone=resolve_timezone(self.timezone),
            semantic=SemanticPolicy(
                enabled=self.semantic.enabled,
                threshold=self.semantic.threshold,
                cooldown=self.semantic.cooldown,
                min_messages=self.semantic.min_messages,
            ),
        )


def parse_day_boundary(value: str) -> time | None:
    if value.strip().lower() in ("off", "none", "disabled", "false"):
        return None
    try:
        hours, minutes = value.split(":")
        return time(int(hours), int(minutes))
    except ValueError:
        raise ValueError(f"{value!r} is not a time of day like 04:00, or off") from None


def resolve_timezone(name: str) -> ZoneInfo:
    if name == "local":
        return local_timezone()
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"{name!r} is not an IANA timezone name such as Europe/Berlin") from None


def local_timezone() -> ZoneInfo:
    """The machine's zone: $TZ, else /etc/localtime's target, else UTC."""
    candidates = [os.environ.get("TZ", "").lstrip(":")]
    localtime = Path("/etc/localtime")
    if localtime.is_symlink():
        target = str(localtime.resolve())
        if "zoneinfo/" in target:
            candidates.append(target.split("zoneinfo/", 1)[1])
    for name in candidates:
        if name:
            try:
                return ZoneInfo(name)
            except (ZoneInfoNotFoundError, ValueError):
                continue
    return ZoneInfo("UTC")
