"""Harm evidence: the points the harm rules give a normalised text under its framing.

The rules are `core/safety/harm_system.py`'s and `core/safety/harm_people.py`'s, in that
order; `core/safety/rules.py`'s docstring says how they are weighed.
"""

from __future__ import annotations

from sessiongate.core.safety.framing import Framing
from sessiongate.core.safety.harm_people import PEOPLE_RULES
from sessiongate.core.safety.harm_system import SYSTEM_RULES
from sessiongate.core.safety.harm_terms import Kind, Rule
from sessiongate.core.safety.text import compiled, words

_HARM_RULES: tuple[Rule, ...] = SYSTEM_RULES + PEOPLE_RULES

_CREATE = (
    r"(?:write|make|create|build|code|program|develop|generate|craft|design|cook|"
    r"synthesi[sz]e|produce|install|deploy|spread|plant|drop|launch|run|send|infect|"
    r"inject|set up|put|hide|get|need|want|give me|working|buy|obtain|3d print|mix|"
    r"seller|dealer)"
)
_CREATE_RE = compiled(words(_CREATE))
_NEGATION_RE = compiled(
    r"(?:^|\s)(?:don't|dont|do not|never|not|no need to|without)(?:\s+\S+){0,2}\s*$"
)


def _negated(text: str, start: int) -> bool:
    return _NEGATION_RE.search(text, max(0, start - 30), start) is not None


def harm_points(text: str, framing: Framing) -> tuple[int, int]:
    """(points that count, points before the framing discounted them)."""
    counted = 0
    raw = 0
    for rule in _HARM_RULES:
        match = rule.pattern.search(text)
        if match is None or (rule.negatable and _negated(text, match.start())):
            continue

        points = rule.points
        if rule.kind is Kind.TOPIC and (_CREATE_RE.search(text) or framing.howto):
            points += 1
        raw += points
        if framing.protective:
            continue
        # An informational question ("what does system32 do") discusses a thing; a how-to
        # ("how do I ...") asks for it, so it keeps its weight.
        if rule.kind is not Kind.DIRECT and framing.info_question and not framing.howto:
            continue
        counted += points
    return counted, raw
