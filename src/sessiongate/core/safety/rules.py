"""The keyword rules of seed 004's safety gate: the deterministic verdict when no control
model is configured, or it fails or answers anything but one marker (DESIGN.md §8).
The parts live beside it: `text.py` (normalisation), `framing.py`,
`harm.py` (with its rule tables in `harm_system.py` and
`harm_people.py`, written in `harm_terms.py`'s vocabulary) and
`action.py`.

How the keyword rules decide
----------------------------
The text is casefolded, curly quotes and dashes are straightened and whitespace is
collapsed; every word and phrase matches on word boundaries, so "skill" never matches
"kill" and "antivirus" never matches "virus".

* **Harm evidence** comes from rules of three kinds, each worth 1 (supporting) or 2 or 3
  (decisive) points:

  - *people*: violence, self-harm, weapons built or bought to hurt, threats, stalking,
    harassment, fraud against a person. Never discounted by question framing:
    "what's the easiest way to kill someone" is a request for harm although it starts
    with "what".
  - *system*: destructive commands (`rm -rf /`, `format c:`), destroying system files,
    disks, backups or logs, switching security off, stealing credentials, breaking in,
    exfiltrating data, flooding a service. Discounted when the request is an
    informational question ("what happens if I delete system32", "why is rm -rf /
    dangerous"): the user asks about the thing, not for it.
  - *topic*: the name of a harmful thing (keylogger, ransomware, botnet, pipe bomb,
    meth...). Alone worth 1; worth 2 with a verb that builds or deploys it ("write",
    "install", "launch", "cook") or a how-to framing ("how do I", "walk me through").
    Discounted by informational framing like *system*.

  A *protective* framing ("protect", "prevent", "detect", "is it safe", "report",
  "support", "hotline"...) discounts all three kinds: "how do I protect against
  ransomware" is CHAT. A negation right before an action ("don't delete", "never
  format") drops that one piece of evidence.

  UNSAFE when the points reach 2. The gate errs towards refusing: a borderline request
  refused costs the user a rephrasing, a destructive one let through may cost a disk.

* **Action evidence** is read per clause (split at punctuation, "and", "then"), after the
  polite openers ("please", "can you", "hey theo"...): a first word that only ever means
  a desktop action ("click", "scroll", "minimize", "mute", "undo") is worth 2; an
  everyday verb that often means one ("open", "close", "run", "kill", "delete", "play",
  "set"...) is worth 1, plus 1 when the text names something on the desktop (a window,
  tab, file, folder, the volume, an app...). AGENT when the points reach 2 — unless the
  text is a question or a how-to framing without a request opener ("how do I take a
  screenshot" asks for an explanation; "can you take a screenshot" asks for the act).

* Otherwise CHAT, the default: questions, conversation and explanations need no action.

Extra `unsafe_terms` (from the agent's configuration) are decisive people-kind evidence:
an operator who lists a term wants it refused whatever the framing. Extra `agent_terms`
are worth 2 points of action evidence.

Confidence
----------
`0.5 + 0.1 * points of the winning label - 0.05 * points of the strongest other label`
(counting the evidence that the framing discounted), clamped to [0.5, 0.99]. CHAT's
points are 1 (nothing pointed elsewhere) plus 1 when the text is framed as a question.
So 0.5 is a coin flip, 0.7 one decisive rule, 0.9 and more several agreeing rules; the
rules never claim certainty (a control model's answer gets 1.0 in the service layer).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from functools import lru_cache

from sessiongate.core.safety.action import action_points
from sessiongate.core.safety.framing import framing_of
from sessiongate.core.safety.harm import harm_points
from sessiongate.core.safety.text import normalise, words
from sessiongate.core.safety.verdict import KEYWORD_JUDGE, Classification, Label

# -- configured terms --------------------------------------------------------------------------


@lru_cache(maxsize=64)
def _terms_pattern(terms: tuple[str, ...]) -> re.Pattern[str] | None:
    cleaned = [normalise(term) for term in terms]
    phrases = [re.escape(term).replace(r"\ ", r"\s+") for term in cleaned if term]
    if not phrases:
        return None
    return re.compile(words(*phrases))


def _matches_terms(text: str, terms: Iterable[str]) -> bool:
    pattern = _terms_pattern(tuple(terms))
    return pattern is not None and pattern.search(text) is not None


# -- the verdict --------------------------------------------------------------------------------

UNSAFE_THRESHOLD = 2
AGENT_THRESHOLD = 2


def _confidence(points: int, other: int) -> float:
    value = 0.5 + 0.1 * points - 0.05 * other
    return round(min(0.99, max(0.5, value)), 2)


def keyword_classify(
    text: str,
    *,
    unsafe_terms: Sequence[str] = (),
    agent_terms: Sequence[str] = (),
) -> Classification:
    """The deterministic verdict for `text` (the module docstring gives the rules)."""
    normalised = normalise(text)
    framing = framing_of(normalised)
    harm, harm_raw = harm_points(normalised, framing)
    if _matches_terms(normalised, unsafe_terms):
        harm += 3
        harm_raw += 3
    action = 0 if framing.question else action_points(normalised)
    action_raw = action_points(normalised)
    if _matches_terms(normalised, agent_terms):
        action += 2
        action_raw += 2
    if harm >= UNSAFE_THRESHOLD:
        return Classification(Label.UNSAFE, _confidence(harm, action_raw), KEYWORD_JUDGE)
    if action >= AGENT_THRESHOLD:
        return Classification(Label.AGENT, _confidence(action, harm_raw), KEYWORD_JUDGE)
    chat = 1 + int(framing.question or framing.protective or normalised.endswith("?"))
    return Classification(Label.CHAT, _confidence(chat, max(harm_raw, action_raw)), KEYWORD_JUDGE)
