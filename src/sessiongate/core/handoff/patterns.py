"""Stage 1 of the hand-off: the patterns that decide whether a finished reply is worth
asking the control model about (an image, a video or a search promised).

They run on every reply of an agent with a hand-off, so they must be cheap: the built-in
ones — seed 000's patterns and the structure of a promise (`structure.py`: an
intent's word with a commitment frame around it) — run on the lowered reply, behind a
gate of plain words, and a match goes through `handoff_guards.guarded` before it counts.
A match only means "worth asking"; stage 2 (`classification.py`) decides.
When they find nothing, the learned backstop (`learned.py`) reads the reply for
the built-in intents: a promise in words no pattern lists.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from sessiongate.core.handoff.guards import guarded
from sessiongate.core.handoff.intents import INTENTS, Intent
from sessiongate.core.handoff.learned import LearnedModel, shipped
from sessiongate.core.handoff.structure import STRUCTURES, Structure

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

#: The built-in patterns. Seed 000's match about one promise in ten; the rest are found
#: by structure (`STRUCTURES`), which docs/benchmarks.md measures with them.
DEFAULT_PATTERNS: dict[Intent, tuple[str, ...]] = dict(SEED_PATTERNS)

#: What every one of an intent's `DEFAULT_PATTERNS` needs in the lowered reply: a reply
#: with none of these skips them (tests/test_handoff.py checks the claim).
DEFAULT_CUES: dict[Intent, tuple[str, ...]] = {
    "image": ("imag", "pictur", "photo"),
    "video": ("video", "animat"),
    "search": ("web", "internet"),
}

#: Typographic apostrophes and quotes as the patterns spell them.
_QUOTES = str.maketrans({"\u2019": "'", "\u2018": "'", "\u02bc": "'"})


class IntentPatterns:
    """Stage 1. `patterns` are written in lower case and run on the reply lowered (how
    the built-in ones run: several times faster than case-insensitive matching); a
    reply none of whose lowered text holds one of an intent's `cues` skips that intent's
    `patterns` (the cues must be what every one of them needs). With `guard`, a match of
    `patterns` it says no to is skipped (`handoff_guards.guarded`). `structures` find
    promises by their structure, on the lowered reply, with the same `guard`.
    `custom` patterns (an operator's) run case-insensitively on the reply as written,
    never skipped or guarded. When nothing matched, `learned` (a classifier) may still
    name one of `learned_intents`."""

    def __init__(
        self,
        patterns: Mapping[Intent, Sequence[str]],
        custom: Mapping[Intent, Sequence[str]] | None = None,
        cues: Mapping[Intent, Sequence[str]] | None = None,
        guard: Callable[[str, int, int], bool] | None = None,
        structures: Mapping[Intent, Structure] | None = None,
        learned: LearnedModel | None = None,
        learned_intents: Iterable[Intent] = (),
    ) -> None:
        custom = custom or {}
        self._learned = learned
        self._learned_intents = tuple(i for i in INTENTS if i in set(learned_intents))
        self._structures = dict(structures or {})
        self.sources = {
            intent: (*patterns.get(intent, ()), *custom.get(intent, ()))
            for intent in INTENTS
            if patterns.get(intent) or custom.get(intent) or intent in self._structures
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
        self._guard = guard

    @property
    def intents(self) -> tuple[Intent, ...]:
        return tuple(intent for intent in INTENTS if intent in self.sources)

    def match(self, text: str) -> tuple[Intent, ...]:
        """The intents whose patterns occur in `text`, in `INTENTS` order."""
        if not text:
            return ()
        plain = text.translate(_QUOTES)
        lowered = plain.lower()
        found = tuple(intent for intent in INTENTS if self._matches(intent, plain, lowered))
        if found or self._learned is None or not self._learned_intents:
            return found
        learned = self._learned.intent(lowered, self._learned_intents)
        return (learned,) if learned is not None else ()

    def _matches(self, intent: Intent, plain: str, lowered: str) -> bool:
        cues = self._cues.get(intent)
        if cues is None or any(cue in lowered for cue in cues):
            for pattern in self._lowered.get(intent, ()):
                if self._found(pattern, lowered):
                    return True
        structure = self._structures.get(intent)
        if structure is not None and structure.found(lowered, self._guard):
            return True
        return any(pattern.search(plain) for pattern in self._custom.get(intent, ()))

    def _found(self, pattern: re.Pattern[str], lowered: str) -> bool:
        # `search` first: most patterns do not match at all, and an iterator per pattern
        # would double the cost of a reply that matches nothing.
        found = pattern.search(lowered)
        guard = self._guard
        while found is not None and guard is not None:
            if not guard(lowered, found.start(), found.end()):
                return True
            found = pattern.search(lowered, max(found.end(), found.start() + 1))
        return found is not None


def patterns_for(
    intents: Iterable[Intent],
    configured: Mapping[Intent, Sequence[str]],
    replace: Iterable[Intent] = (),
    learned: bool = True,
) -> IntentPatterns:
    """The stage-1 patterns of an agent: for each intent it has a tool for, the built-in
    patterns and structure plus its own, or only its own for the intents it
    `replace`s; with `learned`, the backstop for the built-in ones."""
    replaced = set(replace)
    builtin: dict[Intent, tuple[str, ...]] = {}
    own: dict[Intent, tuple[str, ...]] = {}
    for intent in intents:
        own[intent] = tuple(configured.get(intent, ()))
        if intent not in replaced:
            builtin[intent] = DEFAULT_PATTERNS[intent]
    structures = {intent: STRUCTURES[intent] for intent in builtin}
    backstop = shipped() if learned and builtin else None
    return IntentPatterns(builtin, own, DEFAULT_CUES, guarded, structures, backstop, builtin)
