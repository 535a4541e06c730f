"""Seed 000's hybrid hand-off, the pure part: keeping the promises of a model that cannot
call tools ("let me draw that for you") by running the tool after its reply.

Four stages (DESIGN.md §9), one module each for the rules; the service
(`service/handoff.py`) does the I/O:

1. `core/handoff/patterns.py`: regular expressions per intent on the finished reply, well
   under a millisecond for an ordinary reply; `core/handoff/guards.py` drops a match
   framed as no promise (a refusal, the past, advice, a question). No match: nothing
   more happens. A match only means "worth asking".
2. `core/handoff/classification.py`: the control model reads the exchange and answers one
   JSON object `{"tool": "image"|"video"|"search"|null, "prompt": "…", "confidence":
   0.0-1.0}`, parsed strictly; `decide` acts only on an intent that has a tool for this
   caller, at `min_confidence` or above.
3. The tool (this module: `tools_for`, `prompt_argument`; the service runs it as the
   caller).
4. `artifact_link`, `result_text`, `failure_note` (this module): a link to what the tool
   made, the search result, or a note saying why it could not be done, appended to the
   reply.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

#: What a reply can promise that the hand-off knows how to keep.
Intent = Literal["image", "video", "search"]
INTENTS: tuple[Intent, ...] = ("image", "video", "search")


# -- stage 3: the tool ----------------------------------------------------------------


def tools_for(
    tools: Mapping[Intent, str], tools_primary: Mapping[Intent, str], *, primary: bool
) -> dict[Intent, str]:
    """The tool per intent for a caller: the primary user's own where one is set."""
    chosen = dict(tools)
    if primary:
        chosen.update(tools_primary)
    return chosen


#: The argument a tool's prompt goes into, by preference, when the tool has one of them.
PROMPT_ARGUMENTS = (
    "prompt",
    "query",
    "request",
    "q",
    "text",
    "input",
    "description",
    "message",
    "task",
)


def prompt_argument(schema: Mapping[str, Any]) -> str | None:
    """Which argument of a tool (by its JSON Schema) takes the prompt: a preferred name
    among its properties, else its only required string property; None when neither."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return None
    for name in PROMPT_ARGUMENTS:
        if name in properties:
            return name
    required = schema.get("required")
    strings = [
        name
        for name in (required if isinstance(required, list) else [])
        if isinstance(properties.get(name), Mapping) and properties[name].get("type") == "string"
    ]
    return strings[0] if len(strings) == 1 else None


# -- stage 4: what is appended -----------------------------------------------------------

_ARTIFACT_URL = re.compile(
    r"/v1/artifacts/([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})"
)
_NOUN: dict[Intent, str] = {"image": "image", "video": "video", "search": "search result"}
_FAILED: dict[Intent, str] = {
    "image": "I could not make the image",
    "video": "I could not make the video",
    "search": "I could not search the web",
}
MAX_REASON_CHARS = 300


def artifact_in(text: str) -> str | None:
    """The first artifact link in a tool's answer (an agent used as the tool answers in
    text), or None."""
    found = _ARTIFACT_URL.search(text)
    return found.group(1) if found else None


def artifact_link(intent: Intent, artifact_id: str) -> str:
    return f"\n\n[{_NOUN[intent]}](/v1/artifacts/{artifact_id})"


def result_text(text: str, max_chars: int) -> str:
    """A tool's text answer as appended: trimmed, cut at a line (or word) before
    `max_chars` with the cut marked."""
    text = text.strip()
    if len(text) <= max_chars:
        return f"\n\n{text}" if text else ""
    cut = text[:max_chars]
    for mark in ("\n", " "):
        at = cut.rfind(mark)
        if at > max_chars // 2:
            cut = cut[:at]
            break
    return f"\n\n{cut.rstrip()} …"


def failure_note(intent: Intent, reason: str) -> str:
    """The note appended when the tool failed: `(I could not make the image: <why>)`."""
    why = reason.strip().removeprefix("error:").strip() or "the tool failed"
    why = " ".join(why.split())
    if len(why) > MAX_REASON_CHARS:
        why = why[: MAX_REASON_CHARS - 1] + "…"
    return f"\n\n({_FAILED[intent]}: {why.rstrip('.')})"
