"""Building blocks of the configuration shared by its modules: durations written as
`90s`, `10m`, `12h`, `1d` (and `off`), and the base of every section (unknown fields are
an error, so a typo never passes silently)."""

from __future__ import annotations

from datetime import timedelta
from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, PlainSerializer

from sessiongate.durations import format_duration, parse_duration, parse_optional_duration


def _duration(value: Any) -> Any:
    return parse_duration(value) if isinstance(value, str) else value


def _optional_duration(value: Any) -> Any:
    return parse_optional_duration(value) if isinstance(value, str) else value


# Shown (e.g. by `config check`) in the same form they are written: 12h, 10m, off.
Duration = Annotated[
    timedelta, BeforeValidator(_duration), PlainSerializer(format_duration, when_used="json")
]
OptionalDuration = Annotated[
    timedelta | None,
    BeforeValidator(_optional_duration),
    PlainSerializer(format_duration, when_used="json"),
]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")
