"""Human durations for configuration: `90s`, `10m`, `12h`, `1d`, `1h30m`, or `off`."""

from __future__ import annotations

import re
from datetime import timedelta

_PART_RE = re.compile(r"(\d+)(ms|s|m|h|d|w)")
_UNITS = {
    "ms": timedelta(milliseconds=1),
    "s": timedelta(seconds=1),
    "m": timedelta(minutes=1),
    "h": timedelta(hours=1),
    "d": timedelta(days=1),
    "w": timedelta(weeks=1),
}
OFF_WORDS = frozenset({"off", "none", "disabled", "false"})
#: Longer than any window anyone means, and far inside what a timedelta and an int64 of
#: microseconds can hold: `999999999999999999d` is refused, not an overflow.
MAX_DURATION = timedelta(days=36_500)
_MAX_TEXT = 64


def parse_duration(text: str) -> timedelta:
    """Parse a duration; raise ValueError with an example of the accepted forms."""
    if len(text) > _MAX_TEXT:
        raise ValueError(f"a duration is at most {_MAX_TEXT} characters")
    compact = text.strip().lower().replace(" ", "")
    pos = 0
    total = timedelta()
    for match in _PART_RE.finditer(compact):
        if match.start() != pos:
            break
        # Compared as numbers first: a timedelta of 10**18 days would overflow.
        count = int(match[1])
        unit = _UNITS[match[2]]
        if count > MAX_DURATION // unit or total + count * unit > MAX_DURATION:
            raise ValueError(f"{text!r} is longer than the longest duration (36500d)")
        total += count * unit
        pos = match.end()
    if not compact or pos != len(compact):
        raise ValueError(f"{text!r} is not a duration; use forms like 90s, 10m, 12h, 1d, 1h30m")
    return total


def parse_optional_duration(text: str) -> timedelta | None:
    """Like `parse_duration`, but `off` (and friends) switch the feature off."""
    if text.strip().lower() in OFF_WORDS:
        return None
    return parse_duration(text)


def format_duration(value: timedelta | None) -> str:
    if value is None:
        return "off"
    seconds = int(value.total_seconds())
    if value % timedelta(seconds=1):
        return f"{int(value / timedelta(milliseconds=1))}ms"
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"
