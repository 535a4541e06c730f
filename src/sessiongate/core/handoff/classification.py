"""Stage 2 of the hand-off: what the control model is asked, how its answer is read
(strictly: anything but the one object asked for is no answer), and what the answer
leads to.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiongate.core.handoff.intents import INTENTS, Intent

#: How much of the exchange the control model reads: the user's message, and the reply's
#: head and tail (a promise is usually at one end of a long reply).
MAX_USER_CHARS = 500
MAX_REPLY_HEAD = 1200
MAX_REPLY_TAIL = 600
#: A prompt for the tool longer than this is not an answer we trust.
MAX_PROMPT_CHARS = 4000
#: The answer is one small object; anything much longer is not one.
MAX_ANSWER_CHARS = 6000

_ABOUT: dict[Intent, str] = {
    "image": '"image": the reply says it will make, draw or show a picture, photo or image now',
    "video": '"video": the reply says it will make, render or animate a video or clip now',
    "search": '"search": the reply says it will search or look something up on the web now',
}

SYSTEM_PROMPT = """\
You check the reply of a chat assistant that cannot use tools itself. When the reply \
promises to do something right now that needs a tool, the gateway does it and adds the \
result to the reply. Decide whether this reply makes such a promise.

Promises that count:
{intents}

Not a promise: refusing or saying it cannot do it; describing, explaining or imagining \
something in words; telling the user how to do it themselves; talking about something \
made or searched earlier (past tense); a question asking whether the user wants it \
(no commitment yet); an image, video or search mentioned as a topic.

Answer with exactly one JSON object and nothing else:
{{"tool": {choices} or null, "prompt": "<what to make or search for, complete and \
specific, in English>", "confidence": <0.0 to 1.0>}}
When there is no promise, answer {{"tool": null, "prompt": "", "confidence": <how sure \
you are of that>}}. The prompt must stand on its own: take the details from the user's \
message and the reply."""


def system_prompt(intents: Sequence[Intent]) -> str:
    chosen = [i for i in INTENTS if i in intents] or list(INTENTS)
    return SYSTEM_PROMPT.format(
        intents="\n".join(f"- {_ABOUT[i]}" for i in chosen),
        choices=" or ".join(f'"{i}"' for i in chosen),
    )


def excerpt(text: str, head: int, tail: int = 0) -> str:
    """`text`, or its first `head` and last `tail` characters with the cut marked."""
    if len(text) <= head + tail:
        return text
    return text[:head] + " […] " + (text[-tail:] if tail else "")


def classifier_messages(
    reply: str, user_message: str, intents: Sequence[Intent]
) -> list[dict[str, str]]:
    """Stage 2's input: the instructions, then the exchange."""
    exchange = (
        f"User: {excerpt(user_message.strip(), MAX_USER_CHARS)}\n\n"
        f"Assistant: {excerpt(reply.strip(), MAX_REPLY_HEAD, MAX_REPLY_TAIL)}"
    )
    return [
        {"role": "system", "content": system_prompt(intents)},
        {"role": "user", "content": exchange},
    ]


@dataclass(frozen=True, slots=True)
class HandoffRequest:
    """Stage 2's answer: the intent promised (None: none), the tool's prompt, and how
    sure the control model is."""

    intent: Intent | None
    prompt: str
    confidence: float


_FENCE = re.compile(r"^```(?:json)?\s*\n?(.*?)\n?```$", re.DOTALL | re.IGNORECASE)
_KEYS = frozenset({"tool", "prompt", "confidence"})


def parse_request(text: str) -> HandoffRequest | None:
    """The control model's answer, or None when it is not exactly what was asked for.

    Accepted: one JSON object with exactly the keys `tool`, `prompt` and `confidence`
    (surrounding whitespace and one ```json fence around it are tolerated); `tool` one of
    the intents or null; `prompt` a string, not blank when `tool` is set, at most
    `MAX_PROMPT_CHARS`; `confidence` a finite number from 0 to 1 (not a boolean, not a
    string). Anything else — prose around the object, a second object, an unknown tool,
    a missing or extra key — is no answer, and the reply stays as it is.
    """
    if not isinstance(text, str) or len(text) > MAX_ANSWER_CHARS:
        return None
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value: Any = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or set(value) != _KEYS:
        return None
    tool, prompt, confidence = value["tool"], value["prompt"], value["confidence"]
    if tool is not None and tool not in INTENTS:
        return None
    if not isinstance(prompt, str) or len(prompt) > MAX_PROMPT_CHARS:
        return None
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        return None
    confidence = float(confidence)
    if not math.isfinite(confidence) or not 0.0 <= confidence <= 1.0:
        return None
    prompt = prompt.strip()
    if tool is not None and not prompt:
        return None
    return HandoffRequest(tool, prompt, confidence)


@dataclass(frozen=True, slots=True)
class Decision:
    """What stage 2's answer leads to: `act` with `tool`, or why not (`reason`)."""

    act: bool
    intent: Intent | None
    tool: str | None
    reason: str


def decide(request: HandoffRequest, tools: Mapping[Intent, str], min_confidence: float) -> Decision:
    """Act only on an intent that has a tool for this caller, at `min_confidence` or
    above."""
    intent = request.intent
    if intent is None:
        return Decision(False, None, None, "no_promise")
    tool = tools.get(intent)
    if tool is None:
        return Decision(False, intent, None, "no_tool_for_intent")
    if request.confidence < min_confidence:
        return Decision(False, intent, tool, "low_confidence")
    return Decision(True, intent, tool, "confident")
