"""Seed 000's hybrid hand-off, the pure part: keeping the promises of a model that cannot
call tools ("let me draw that for you") by running the tool after its reply.

Four stages (DESIGN.md §9); this module holds the rules of each, the service
(`service/handoff.py`) does the I/O:

1. `IntentPatterns.match`: regular expressions per intent on the finished reply, case-
   insensitive, well under a millisecond for an ordinary reply. No match: nothing more
   happens. A match only means "worth asking": the patterns are a cheap, wide net, and
   phrases such as "I can't generate images" match them on purpose.
2. `classifier_messages` / `parse_request`: the control model reads the exchange and
   answers one JSON object `{"tool": "image"|"video"|"search"|null, "prompt": "…",
   "confidence": 0.0-1.0}`, parsed strictly (anything else is no answer). `decide` acts
   only on an intent that has a tool for this caller, at `min_confidence` or above.
3. The tool (the service runs it as the caller).
4. `appended_text`: a link to what the tool made, the search result, or a note saying
   why it could not be done, appended to the reply.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

#: What a reply can promise that the hand-off knows how to keep.
Intent = Literal["image", "video", "search"]
INTENTS: tuple[Intent, ...] = ("image", "video", "search")

#: Seed 000's stage-1 patterns, verbatim (its `TOOL_PATTERNS`).
SEED_PATTERNS: dict[Intent, tuple[str, ...]] = {
    "image": (
        r"(?:generate|create|make|draw)\s+(?:an?\s+)?(?:image|picture|photo)",
        r"(?:here'?s|let me show)\s+(?:the\s+)?(?:image|picture)",
    ),
    "video": (
        r"(?:generate|create|make)\s+(?:a\s+)?video",
        r"(?:animate|turn into video)",
    ),
    "search": (r"(?:search|look up)\s+(?:the\s+)?(?:web|internet)",),
}

#: Added to seed 000's by default: phrasings of promises the seed's patterns miss. Each
#: was found on the development half of the first batch of `tests/data/
#: handoff_promising.jsonl` (docs/benchmarks.md says how they were measured since).
_SOON = (
    r"(?:let me|let's|i'll|i will|i'm going to|i am going to|i'm gonna|gonna|i'm|i am"
    r"|while i|and i'll)"
)
_IMAGE = (
    r"(?:image|picture|pic|photo|photograph|illustration|drawing|sketch|painting|portrait"
    r"|artwork|logo|poster|wallpaper|comic|visual|selfie|cartoon|doodle|avatar|banner)s?\b"
)
_VIDEO = r"(?:video|clip|animation|gif|time-?lapse|footage|trailer|reel)s?\b"
_MAKE = (
    r"(?:generat|creat|mak|draw|paint|sketch|render|design|whip|produc|snap|cook|conjur"
    r"|put|illustrat)\w*"
)
_MAKE_VIDEO = _MAKE[:-4] + r"|film|shoot|record|animat)\w*"
_WORDS = r"(?:[\w'-]+\s+){0,5}?"
_START = r"(?:^|[.!?:;,*(\n]\s*|\b(?:okay|ok|sure|alright|now|yes)\W+)"
_HERE = r"\b(?:here you go|here it is|here comes?|ta-?da|voil[aà])\b[^.!?\n]{0,60}?\b"

EXTRA_PATTERNS: dict[Intent, tuple[str, ...]] = {
    "image": (
        rf"\b{_SOON}\s+(?:\w+\s+){{0,2}}?{_MAKE}\s+{_WORDS}{_IMAGE}",
        rf"{_START}(?:generating|creating|making|drawing|painting|rendering|sketching"
        rf"|designing)\s+{_WORDS}{_IMAGE}",
        r"\b(?:let me|i'll|i will|i'm going to|i'm gonna|gonna)\s+(?:quickly\s+)?"
        r"(?:draw|sketch|paint|doodle)\s+(?:that|this|it|one|them|you|something|him|her|us)\b",
        r"\bi'm\s+(?:drawing|sketching|painting)\s+(?:that|this|it|one|you|something)\b",
        rf"\b(?:coming (?:right )?up|give me a (?:sec|second|moment|minute)|one moment|hold on)"
        rf"\W+{_WORDS}{_IMAGE}",
        rf"{_IMAGE}[^.!?\n]{{0,80}}?\b(?:coming (?:right )?up|on (?:its|the) way)",
        rf"{_HERE}{_IMAGE}",
        rf"\bi (?:just )?(?:made|drew|created|generated|painted|rendered|sketched|designed)"
        rf"\s+(?:you\s+)?{_WORDS}{_IMAGE}",
        rf"\blet me show you\s+{_WORDS}{_IMAGE}",
        r"\bbeing\s+(?:drawn|painted|sketched|generated|rendered|illustrated)\b",
        r"\b(?:let me|i'll|i will|i'm going to|i'm gonna)\s+illustrate\b",
        r"\b(?:let me|i'll|i will)\s+get\s+(?:that|it|this|one)\s+(?:made|drawn|generated"
        r"|rendered|painted)\b",
        r"\b(?:let me|i'll|i will|i'm going to|i'm gonna)\s+(?:\w+\s+)?(?:take|snap|shoot)"
        r"\s+(?:you\s+)?(?:a|an|another|some)\s+(?:[\w'-]+\s+){0,2}?"
        r"(?:photo|pic|picture|selfie|snapshot)s?\b",
    ),
    "video": (
        rf"\b{_SOON}\s+(?:\w+\s+){{0,2}}?{_MAKE_VIDEO}\s+{_WORDS}{_VIDEO}",
        rf"{_START}(?:generating|creating|making|rendering|filming|animating|recording)"
        rf"\s+{_WORDS}{_VIDEO}",
        rf"\b{_SOON}\s+turn(?:ing)?\s+{_WORDS}into\s+(?:an?\s+)?(?:\w+\s+)?{_VIDEO}",
        rf"\b{_SOON}\s+bring\s+{_WORDS}to life",
        rf"\b(?:coming (?:right )?up|give me a (?:sec|second|moment|minute)|one moment|hold on)"
        rf"\W+{_WORDS}{_VIDEO}",
        rf"{_VIDEO}[^.!?\n]{{0,80}}?\b(?:coming (?:right )?up|on (?:its|the) way)",
        rf"{_HERE}{_VIDEO}",
    ),
    "search": (
        rf"\b{_SOON}\s+(?:\w+\s+){{0,2}}?(?:search|look(?:ing)? up|googl|brows|research"
        r"|check|dig|hunt|find|look|brows)\w*\b[^.!?\n]{0,60}?"
        r"\b(?:online|on the web|on the internet|the web|the internet|on google|web search"
        r"|(?:web)?sites)\b",
        r"\b(?:see|check|find out) what (?:the )?(?:internet|web|google)\b",
        r"\b(?:a (?:sec|second|moment|minute)|one (?:sec|moment))\s+(?:to|while i|and i'll)\s+"
        r"(?:search|look(?:ing)? (?:\w+ )?up|googl|check|find)",
        rf"\b{_SOON}\s+(?:\w+\s+){{0,2}}?check\s+(?:[\w'-]+\s+){{0,3}}?(?:news|headlines"
        r"|scores?|reviews|listings|prices|forecast|showtimes|timetables?)\b",
        rf"\b{_SOON}\s+(?:\w+\s+){{0,2}}?(?:search(?:ing)?|googl\w*|look(?:ing)? (?:it |that |"
        r"this )?up|research(?:ing)?)\b",
        rf"\b{_SOON}\s+(?:\w+\s+){{0,2}}?(?:run|do|start)(?:ning)?\s+(?:a\s+)?(?:quick\s+)?"
        r"(?:web\s+|online\s+|google\s+)?search",
        rf"{_START}(?:searching|googling|looking (?:it |that )?up|browsing)\b",
        r"\b(?:searching|googling|looking it up)\s+(?:now|right now)\b",
        rf"\b{_SOON}\s+(?:look|hunt)\s+(?:around\s+)?for\s+(?:[\w'-]+\s+){{0,3}}?"
        r"(?:news|articles|reviews|results|sources|info|information|studies|listings|prices"
        r"|deals|places|options)\b",
    ),
}

#: What the hand-off matches when an agent configures nothing.
DEFAULT_PATTERNS: dict[Intent, tuple[str, ...]] = {
    intent: SEED_PATTERNS[intent] + EXTRA_PATTERNS[intent] for intent in INTENTS
}

#: What every built-in pattern of an intent needs in the lowered reply: a reply with
#: none of these skips them (most replies; tests/test_handoff.py checks the claim).
DEFAULT_CUES: dict[Intent, tuple[str, ...]] = {
    "image": (
        "imag", "pic", "photo", "illustrat", "draw", "sketch", "paint", "portrait", "artwork",
        "logo", "poster", "wallpaper", "comic", "visual", "selfie", "cartoon", "doodle",
        "avatar", "banner", "generated", "rendered", "made", "snapshot",
    ),
    "video": (
        "video", "clip", "animat", "gif", "lapse", "footage", "trailer", "reel", "life",
    ),
    "search": (
        "search", "googl", "look", "brows", "online", "web", "internet", "sites", "check",
        "find", "hunt",
    ),
}  # fmt: skip

#: Typographic apostrophes and quotes as the patterns spell them.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


class IntentPatterns:
    """Stage 1. `patterns` are written in lower case and run on the reply lowered (how
    the built-in ones run: several times faster than case-insensitive matching); a
    reply none of whose lowered text holds one of an intent's `cues` skips that intent's
    `patterns` (the cues must be what every one of them needs). `custom` patterns (an
    operator's) run case-insensitively on the reply as written, never skipped."""

    def __init__(
        self,
        patterns: Mapping[Intent, Sequence[str]],
        custom: Mapping[Intent, Sequence[str]] | None = None,
        cues: Mapping[Intent, Sequence[str]] | None = None,
    ) -> None:
        custom = custom or {}
        self.sources = {
            intent: (*patterns.get(intent, ()), *custom.get(intent, ()))
            for intent in INTENTS
            if patterns.get(intent) or custom.get(intent)
        }
        self._lowered = {
            intent: [re.compile(p) for p in found] for intent, found in patterns.items() if found
        }
        self._custom = {
            intent: [re.compile(p, re.IGNORECASE) for p in found]
            for intent, found in custom.items()
            if found
        }
        self._cues = {intent: tuple(found) for intent, found in (cues or {}).items()}

    @property
    def intents(self) -> tuple[Intent, ...]:
        return tuple(intent for intent in INTENTS if intent in self.sources)

    def match(self, text: str) -> tuple[Intent, ...]:
        """The intents whose patterns occur in `text`, in `INTENTS` order."""
        if not text:
            return ()
        plain = text.translate(_QUOTES)
        lowered = plain.lower()
        return tuple(intent for intent in INTENTS if self._matches(intent, plain, lowered))

    def _matches(self, intent: Intent, plain: str, lowered: str) -> bool:
        cues = self._cues.get(intent)
        if cues is None or any(cue in lowered for cue in cues):
            for pattern in self._lowered.get(intent, ()):
                if pattern.search(lowered):
                    return True
        return any(pattern.search(plain) for pattern in self._custom.get(intent, ()))


def patterns_for(
    intents: Iterable[Intent],
    configured: Mapping[Intent, Sequence[str]],
    replace: Iterable[Intent] = (),
) -> IntentPatterns:
    """The stage-1 patterns of an agent: for each intent it has a tool for, the built-in
    patterns plus its own, or only its own for the intents it `replace`s."""
    replaced = set(replace)
    builtin: dict[Intent, tuple[str, ...]] = {}
    own: dict[Intent, tuple[str, ...]] = {}
    for intent in intents:
        own[intent] = tuple(configured.get(intent, ()))
        if intent not in replaced:
            builtin[intent] = DEFAULT_PATTERNS[intent]
    return IntentPatterns(builtin, own, DEFAULT_CUES)


# -- stage 2: the control model ----------------------------------------------------------

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
