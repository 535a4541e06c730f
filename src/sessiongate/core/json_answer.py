"""The strict reading of a control model's JSON answer, shared by task and memory
extraction: one object with exactly one key, whose value is a list of at most so many
entries; nothing else. Surrounding whitespace and one Markdown code fence around the
object are tolerated (small local models add them, and they change nothing); NaN and
Infinity are not JSON. What each entry may be is the caller's to check."""

from __future__ import annotations

import json
import re
from typing import Any

_FENCE = re.compile(r"\A```(?:json)?[ \t]*\n(.*)\n```\Z", re.DOTALL)


class AnswerRefused(ValueError):
    """The answer is not the promised object; `reason` is safe to log (it never repeats
    the answer's text)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def keyed_list(text: str, key: str, *, max_chars: int, max_entries: int, noun: str) -> list[Any]:
    """The list of an answer that is exactly `{"<key>": [...]}`, or AnswerRefused: a
    text longer than `max_chars` (unread), not JSON, another shape, more than
    `max_entries` entries ("more than N <noun>")."""
    if len(text) > max_chars:
        raise AnswerRefused("the answer is too long")
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        raise AnswerRefused("the answer is not JSON") from None
    if not isinstance(value, dict) or set(value) != {key}:
        raise AnswerRefused(f'the answer is not an object with exactly the key "{key}"')
    entries = value[key]
    if not isinstance(entries, list):
        raise AnswerRefused(f'"{key}" is not a list')
    if len(entries) > max_entries:
        raise AnswerRefused(f"more than {max_entries} {noun}")
    return entries


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")
