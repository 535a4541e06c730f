"""The control model: who decides lifecycle questions such as "is this a new topic?".

Resolution is session override → `agents.defaults.control_model` → the deterministic
fallback chain, and never looks at the reply model. The last link of every chain is the
built-in lexical judge, so a decision is always reached without network or randomness.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

BUILTIN_JUDGE = "builtin:lexical"


class ControlSource(StrEnum):
    SESSION = "session"
    DEFAULTS = "defaults"
    FALLBACK = "fallback"


@dataclass(frozen=True, slots=True)
class ControlCandidate:
    model: str
    source: ControlSource


def resolve_control_chain(
    session_override: str | None,
    defaults_model: str | None,
    fallback_chain: Sequence[str] = (),
) -> tuple[ControlCandidate, ...]:
    """The ordered control models to try. Duplicates are dropped; the builtin ends it.

    The first entry is *the* control model; later ones are only used when an earlier one
    fails at run time. The reply model is deliberately not a parameter.
    """
    ordered: list[ControlCandidate] = []
    if session_override:
        ordered.append(ControlCandidate(session_override, ControlSource.SESSION))
    if defaults_model:
        ordered.append(ControlCandidate(defaults_model, ControlSource.DEFAULTS))
    for name in (*fallback_chain, BUILTIN_JUDGE):
        ordered.append(ControlCandidate(name, ControlSource.FALLBACK))
    seen: set[str] = set()
    chain: list[ControlCandidate] = []
    for candidate in ordered:
        if candidate.model not in seen:
            seen.add(candidate.model)
            chain.append(candidate)
    return tuple(chain)


class TopicJudge(Protocol):
    """The control-model port for topic shifts."""

    name: str

    async def judge_topic_shift(self, recent: Sequence[str], inbound: str) -> float:
        """Confidence in [0, 1] that `inbound` starts a new topic after `recent`."""
        ...


_WORD_RE = re.compile(r"[^\W_]{3,}", re.UNICODE)
_STOPWORDS = frozenset(
    (
        "the and for are but not you your with this that have from they will would there "
        "their what when where which who how can could should about into than then them these "
        "those was were been being has had does did just also very more most some any all our "
        "out over under again once here why its it's i'm let lets please thanks thank okay"
    ).split()
)


def content_words(text: str) -> frozenset[str]:
    return frozenset(w for w in _WORD_RE.findall(text.casefold()) if w not in _STOPWORDS)


def lexical_shift_confidence(recent: Sequence[str], inbound: str) -> float:
    """1 - (share of the inbound message's content words already seen in `recent`).

    No content words in the inbound message (a greeting, "ok") means no evidence of a
    shift: 0.0. No recent text means nothing to shift from: 0.0.
    """
    words = content_words(inbound)
    if not words:
        return 0.0
    seen: set[str] = set()
    for text in recent:
        seen |= content_words(text)
    if not seen:
        return 0.0
    overlap = len(words & seen) / len(words)
    return round(1.0 - overlap, 6)


class LexicalTopicJudge:
    """Deterministic built-in judge: same inputs, same confidence, no I/O."""

    name = BUILTIN_JUDGE

    async def judge_topic_shift(self, recent: Sequence[str], inbound: str) -> float:
        return lexical_shift_confidence(recent, inbound)
