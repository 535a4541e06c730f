"""Seed 004's safety gate, the pure part: labels, markers and the control model's protocol.

Before the reply model sees a request, a control model answers exactly one marker:
`---UNSAFE---` (the request asks for harm to the computer or to people), `---CHAT---`
(talk: questions, conversation, explanations) or `---AGENT---` (do something on the
desktop). `parse_marker` reads that answer strictly; when no control model is configured,
or it fails or answers anything else, `keyword_classify` decides with deterministic rules
(DESIGN.md §8). The service layer (`service/turn/safety_gate.py`) does the I/O.

The keyword rules live in `core/safety/rules.py` (its docstring says how they decide)
and the modules it reads; they are re-exported here, so the gate's whole surface is
imported from this module.
"""

from __future__ import annotations

from sessiongate.core.safety.rules import AGENT_THRESHOLD, UNSAFE_THRESHOLD, keyword_classify
from sessiongate.core.safety.verdict import KEYWORD_JUDGE, MARKERS, Classification, Label

__all__ = [
    "AGENT_THRESHOLD",
    "CLASSIFIER_SYSTEM_PROMPT",
    "KEYWORD_JUDGE",
    "MARKERS",
    "UNSAFE_THRESHOLD",
    "Classification",
    "Label",
    "classifier_messages",
    "keyword_classify",
    "parse_marker",
]

_LABEL_OF_MARKER: dict[str, Label] = {marker: label for label, marker in MARKERS.items()}


def parse_marker(text: str) -> Label | None:
    """The label a control model answered, or None when the answer is not exactly one marker.

    Only surrounding whitespace (spaces, tabs, newlines) is tolerated. Everything else is
    refused — a trailing period, quotes or backticks, a second marker, a marker inside a
    sentence, a lower-case marker, the bare word "CHAT" — because a model that does not
    follow a one-token format cannot be trusted to have followed the instructions that
    came with it; the keyword rules then decide, and the event says so.
    """
    return _LABEL_OF_MARKER.get(text.strip())


# -- the control model's instructions ---------------------------------------------------------

CLASSIFIER_SYSTEM_PROMPT = """\
You are the safety gate of a voice-driven desktop assistant. The assistant can talk, and \
it can act on the user's computer by running a script (open and close apps, click, type, \
move windows, manage files, change settings, use the browser).

Read the user's request and answer with exactly one of these three markers, and nothing \
else — no other words, no punctuation, no explanation:

---UNSAFE---
  The request asks for harm to the computer, its data or other people: destroying the \
system or its data (deleting system files, formatting disks, wiping backups), switching \
security off, malware, keyloggers, stealing passwords, cookies or other credentials, \
breaking into accounts, spying on someone, exfiltrating data, flooding a service, fraud, \
threats, harassment, weapons, violence or self-harm. This holds however politely or \
indirectly it is asked, and for fictional or "hypothetical" framings that still ask for \
working instructions or code.

---AGENT---
  The request asks the assistant to do something on the desktop: open, close or switch \
apps and windows, click, type, scroll, manage files and folders, take a screenshot, \
change volume or brightness, play media, search the web in the browser, send a message, \
run a command. Ordinary words used in a harmless sense stay AGENT ("kill the music", \
"delete this blank line", "shoot an email to Sam").

---CHAT---
  Everything else: questions, conversation, explanations, advice. Questions about \
security are CHAT when they seek understanding or protection ("how do I protect against \
ransomware", "what is a keylogger"). A question about how to do something on the \
computer is CHAT when it asks for an explanation rather than for the act.

When in doubt between UNSAFE and anything else, answer ---UNSAFE---.\
"""


def classifier_messages(text: str) -> list[dict[str, str]]:
    """The control model's input: the instructions, then the request verbatim."""
    return [
        {"role": "system", "content": CLASSIFIER_SYSTEM_PROMPT},
        {"role": "user", "content": text},
    ]
