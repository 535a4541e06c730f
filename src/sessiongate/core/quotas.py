"""Quotas (DESIGN.md §15): how many turns a user may start per minute and how many tokens
their turns may use per day. Pure rules: which window a moment falls in, how long until it
ends (`Retry-After`), which limit applies (a user's own over the `[quotas]` defaults), and
whether a request is refused. The counting itself is the store's (one atomic statement per
admitted request, shared by every gateway: service/quotas.py).

Windows are fixed and aligned to UTC: a minute starts at second 0, a day at 00:00 UTC.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessiongate.errors import InvalidInput, SessionGateError

REQUESTS_PER_MINUTE = "requests_per_minute"
TOKENS_PER_DAY = "tokens_per_day"
KINDS = (REQUESTS_PER_MINUTE, TOKENS_PER_DAY)
#: Each quota's window, in seconds.
WINDOW_SECONDS = {REQUESTS_PER_MINUTE: 60, TOKENS_PER_DAY: 86_400}
#: The largest limit accepted (fits a signed 64-bit column with room to count past it).
MAX_LIMIT = 10**15
_WHAT = {REQUESTS_PER_MINUTE: "requests per minute", TOKENS_PER_DAY: "tokens per day"}


class QuotaExceeded(SessionGateError):
    """A request over one of the caller's quotas: 429, with `Retry-After`."""

    code = "quota_exceeded"
    status = 429

    def __init__(self, message: str, *, kind: str, retry_after: int) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class QuotaLimits:
    """Limits per quota; None: unlimited (as defaults) or not set (as a user's own)."""

    requests_per_minute: int | None = None
    tokens_per_day: int | None = None

    def of(self, kind: str) -> int | None:
        value: int | None = getattr(self, kind)
        return value

    def over(self, defaults: QuotaLimits) -> QuotaLimits:
        """These limits where set, the defaults elsewhere."""
        return QuotaLimits(
            defaults.requests_per_minute
            if self.requests_per_minute is None
            else self.requests_per_minute,
            defaults.tokens_per_day if self.tokens_per_day is None else self.tokens_per_day,
        )

    @property
    def unlimited(self) -> bool:
        return self.requests_per_minute is None and self.tokens_per_day is None

    def to_dict(self) -> dict[str, int | None]:
        return {kind: self.of(kind) for kind in KINDS}


@dataclass(frozen=True, slots=True)
class Window:
    kind: str
    #: Seconds since the epoch (UTC) at which the window starts; it ends `size` later.
    start: int
    size: int

    @property
    def end(self) -> int:
        return self.start + self.size

    def retry_after(self, now: datetime) -> int:
        """Whole seconds until the window ends, at least 1 (`Retry-After`)."""
        return max(1, math.ceil(self.end - now.timestamp()))


def window_of(kind: str, now: datetime) -> Window:
    """The window of `kind` that `now` (timezone-aware) falls in."""
    size = WINDOW_SECONDS[kind]
    seconds = math.floor(now.timestamp())
    return Window(kind, seconds - seconds % size, size)


def refusal(kind: str, limit: int, window: Window, now: datetime) -> QuotaExceeded:
    """The error for a request over `kind`, naming the quota and when it resets."""
    wait = window.retry_after(now)
    return QuotaExceeded(
        f"quota exceeded: {limit} {_WHAT[kind]}; try again in {wait} s",
        kind=kind,
        retry_after=wait,
    )


def tokens_refused(limit: int | None, used: int) -> bool:
    """A turn is refused when the day's tokens already reached the limit (the turn that
    crosses it runs: its size is known only once it has run)."""
    return limit is not None and used >= limit


def request_admitted(limit: int, counted: int | None) -> bool:
    """Whether a request was admitted: the store counts it only while the window's count is
    under the limit and answers the new count, or None when it did not count it."""
    return limit > 0 and counted is not None and counted <= limit


def usage_tokens(usage: Mapping[str, Any]) -> int:
    """A turn's tokens from its `end` usage (prompt + completion; estimated when the
    provider reported none, as the usage says)."""
    total = 0
    for field in ("prompt_tokens", "completion_tokens"):
        value = usage.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            total += value
    return total


def parse_overrides(body: object) -> dict[str, int | None]:
    """`{"requests_per_minute": 10, "tokens_per_day": null}` checked: known quotas only,
    each a whole number 0..MAX_LIMIT, or null to clear the user's own limit (the default
    applies again)."""
    if not isinstance(body, Mapping):
        raise InvalidInput("quotas must be an object", code="invalid_quotas")
    changes: dict[str, int | None] = {}
    for kind, value in body.items():
        if kind not in KINDS:
            known = ", ".join(KINDS)
            raise InvalidInput(
                f"quotas: unknown quota {kind!r} (known: {known})", code="invalid_quotas"
            )
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_LIMIT
        ):
            raise InvalidInput(
                f"quotas.{kind} must be a whole number from 0 to {MAX_LIMIT}, or null",
                code="invalid_quotas",
            )
        changes[kind] = value
    return changes


def with_changes(current: QuotaLimits, changes: Mapping[str, int | None]) -> QuotaLimits:
    """`current` with the quotas `changes` names set (None clears)."""
    values = current.to_dict()
    values.update(changes)
    return QuotaLimits(values[REQUESTS_PER_MINUTE], values[TOKENS_PER_DAY])
