"""Checking one WebSocket text frame before it may become a turn: size, JSON, nesting.

Each failure has its own code, answered in an error frame while the socket stays open.
Seed 001's endpoints skip a frame with nothing to say instead (`seed_skips`).
"""

from __future__ import annotations

import json
from typing import Any

import orjson


class FrameError(Exception):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def parse_frame(text: str, *, max_bytes: int, max_depth: int) -> dict[str, Any]:
    """The frame as a JSON object, or FrameError."""
    # Characters first (free), bytes only when it could matter.
    if len(text) > max_bytes or (len(text) * 4 > max_bytes and len(text.encode()) > max_bytes):
        raise FrameError("frame_too_large", f"a frame may hold at most {max_bytes} bytes")
    try:
        # orjson refuses nesting past 1024 levels itself, without recursing in Python.
        data = orjson.loads(text)
    except orjson.JSONDecodeError:
        data = _strict_json_fallback(text, max_depth)
    if not isinstance(data, dict):
        raise FrameError("invalid_frame", "a message frame is a JSON object")
    if json_depth(data) > max_depth:
        raise FrameError("frame_too_deep", f"a frame may nest at most {max_depth} levels")
    return data


def seed_skips(data: dict[str, Any]) -> bool:
    """Whether seed 001's endpoints pass over this frame without a word: its server read
    `content` and went on to the next frame when it was empty (`if not user_message:
    continue`), so its app never shows an error for one. Missing, null, empty and other
    falsy content is skipped as it was; blank text too (that server sent it to the model;
    the gateway never runs a blank turn, and a skip is what the app lives with). Content of
    any other kind still gets its error frame, and `/v1/ws` answers every one of these
    with `invalid_content`."""
    content = data.get("content")
    return not content or (isinstance(content, str) and not content.strip())


def _strict_json_fallback(text: str, max_depth: int) -> Any:
    """orjson also refuses JSON that is well-formed but holds an escaped lone surrogate
    (`"\\ud800"`); the standard parser reads it, so the frame gets the same answer as
    the REST body would (`invalid_content`), not `invalid_json`."""
    try:
        return json.loads(text)
    except RecursionError:
        raise FrameError("frame_too_deep", f"a frame may nest at most {max_depth} levels") from None
    except ValueError:
        raise FrameError("invalid_json", "Invalid message format") from None


def json_depth(value: Any) -> int:
    """How deeply objects and arrays nest (a scalar is 0, `{}` is 1); iterative, so no
    input can exhaust the stack."""
    deepest = 0
    pending: list[tuple[Any, int]] = [(value, 0)]
    while pending:
        item, depth = pending.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list):
            children = item
        else:
            continue
        depth += 1
        deepest = max(deepest, depth)
        pending.extend((child, depth) for child in children)
    return deepest
