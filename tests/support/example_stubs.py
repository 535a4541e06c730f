"""What the stub model (tests/support/openai_wire_server.py) answers for each shipped
example, computed from the request body: the model's name (tests/support/served_example.py
names them `stub-reply` and `stub-control`), the system text and the last message.

Each answer names who gave it, so a test can tell which model and which persona a turn
reached from the reply alone.
"""

from __future__ import annotations

import json
from typing import Any

from sessiongate.core.output_contract import DELIMITER
from tests.support.openai_wire_server import WireAnswer
from tests.support.served_example import CONTROL_MODEL, REPLY_MODEL

#: The model name examples/builderos/relay.py is given in the tests.
RELAY_MODEL = "stub-relay"


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content or [] if p.get("type") == "text")


def last_text(body: dict[str, Any]) -> str:
    return text_of(body["messages"][-1]["content"])


def system_text(body: dict[str, Any]) -> str:
    return "\n".join(text_of(m["content"]) for m in body["messages"] if m["role"] == "system")


# -- seed 004: Theo ------------------------------------------------------------------------

UNSAFE_WORDS = ("wipe the disk", "steal")
AGENT_WORDS = ("create a file",)


def theo(body: dict[str, Any]) -> WireAnswer:
    last = last_text(body)
    if body["model"] == CONTROL_MODEL:  # the safety gate: one marker
        if any(word in last for word in UNSAFE_WORDS):
            return WireAnswer("---UNSAFE---")
        if any(word in last for word in AGENT_WORDS):
            return WireAnswer("---AGENT---")
        return WireAnswer("---CHAT---")
    if last.startswith("---AGENT---"):  # the main model, driven by the marker put first
        script = (
            "with open('note.txt', 'w') as f:\n    f.write('hello')\nprint(open('note.txt').read())"
        )
        return WireAnswer(f"{script}\n{DELIMITER}\nDone, I created the file.")
    return WireAnswer(f"\n{DELIMITER}\nYou said: {last.splitlines()[-1]}")


# -- seed 002: LifeHub ---------------------------------------------------------------------

LIFEHUB_PLAN = {
    "plan": [
        {"step": 1, "tool": "notes_search", "tool_input": {"query": "running"}},
        {"step": 2, "tool": None, "description": "Synthesize"},
    ]
}


def lifehub(body: dict[str, Any]) -> WireAnswer:
    if body["model"] != REPLY_MODEL:
        return WireAnswer("unexpected model", status=500)
    if "You are a planning agent" in system_text(body):
        return WireAnswer(json.dumps(LIFEHUB_PLAN))
    seen = json.dumps(body["messages"])
    # The explainer: from the request, the plan and the context log.
    if "long run" in seen:
        return WireAnswer("Your notes say the long run is on Saturday.")
    return WireAnswer("Your notes say nothing about running.")


# -- seed 001: BuilderOS -------------------------------------------------------------------


def builderos(body: dict[str, Any]) -> WireAnswer:
    who = {REPLY_MODEL: "jarvis", RELAY_MODEL: "relay"}.get(body["model"])
    if who is None:
        return WireAnswer("unexpected model", status=500)
    return WireAnswer(f"{who} heard: {last_text(body)}")


# -- seed 000: BrinChat --------------------------------------------------------------------


def brinchat(body: dict[str, Any]) -> WireAnswer:
    system = system_text(body)
    if body["model"] == CONTROL_MODEL:
        if "list the tasks" in system:  # post-reply task extraction
            found = "buy running shoes" in json.dumps(body["messages"]).lower()
            tasks = [{"title": "Buy running shoes"}] if found else []
            return WireAnswer(json.dumps({"tasks": tasks}))
        # The hand-off's stage 2, should stage 1 ever ask: no promise made.
        return WireAnswer(json.dumps({"tool": None, "prompt": "", "confidence": 0.0}))
    persona = "lexi" if "You are Lexi" in system else "brin"
    return WireAnswer(f"{persona} heard: {last_text(body)}")
