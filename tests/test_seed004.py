"""Seed 004 ("Theo", a voice-driven desktop agent) end to end, by its five scenario groups.

Everything is the real component except the hosted models: the gateway on loopback,
httpx as the desktop client calling `GET /ai`, the OpenAI adapter talking to a local
server that speaks OpenAI's streaming wire (playing both the classifier and the main
model), and bubblewrap running the scripts.
"""

from __future__ import annotations

import base64
import json
import sqlite3
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.core.output_contract import DELIMITER, FALLBACK_ANSWER
from tests.support.gateway import Gateway, running_gateway
from tests.support.openai_wire_server import WireAnswer, WireServer, openai_wire_server

#: What the scripted classifier answers for the requests these tests send.
UNSAFE_WORDS = ("wipe the disk", "steal")
AGENT_WORDS = ("create a file", "fail on purpose", "no delimiter please", "loop forever")
#: What the main model writes before the delimiter of a CHAT request that should have had
#: no script: it would print, and exit non-zero, if anything ran it.
CHAT_SCRIPT = "print('a chat request ran a script')\nraise SystemExit(7)"
PNG = base64.b64encode(
    b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x02\x00\x00\x00"
    b"\x90wS\xde\x00\x00\x00\x0cIDATx\x9cc\xf8\x0f\x00\x00\x01\x01\x00\x05\x18\xd8N\x00\x00"
    b"\x00\x00IEND\xaeB`\x82"
).decode()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


def respond(body: dict[str, Any]) -> WireAnswer:
    last = _text_of(body["messages"][-1]["content"])
    if body["model"] == "control-model":
        if "classifier down" in last:
            return WireAnswer(status=500)
        if any(w in last for w in UNSAFE_WORDS):
            return WireAnswer("---UNSAFE---")
        if any(w in last for w in AGENT_WORDS):
            return WireAnswer("---AGENT---")
        return WireAnswer("---CHAT---")
    # The main model: seed 004's contract, driven by the marker the gateway put first.
    if "no delimiter please" in last:
        return WireAnswer("I would open it for you now.")
    if last.startswith("---AGENT---"):
        if "fail on purpose" in last:
            script = "import sys\nprint('about to fail')\nsys.exit(3)"
        elif "loop forever" in last:
            script = "while True:\n    pass"
        else:
            script = (
                "with open('note.txt', 'w') as f:\n    f.write('hello')\n"
                "print(open('note.txt').read())"
            )
        return WireAnswer(f"{script}\n{DELIMITER}\nDone, I created the file.")
    if "capital of France" in last:
        # A script under a CHAT label: the gateway keeps it but must never run it.
        return WireAnswer(f"{CHAT_SCRIPT}\n{DELIMITER}\nYou said: {last.splitlines()[-1]}")
    return WireAnswer(f"\n{DELIMITER}\nYou said: {last.splitlines()[-1]}")


def settings_for(
    tmp_path: Path, url: str, actions: str = "sandbox", on_failure: str = "keywords"
) -> Settings:
    return Settings(
        data_dir=tmp_path,
        lifecycle={"timezone": "UTC", "idle_window": "off", "day_boundary": "off"},
        models={
            "control": {"provider": "openai", "base_url": f"{url}/v1", "model": "control-model"},
            "theo": {
                "provider": "openai",
                "base_url": f"{url}/v1",
                "model": "theo-model",
                "max_retries": 0,
            },
        },
        agents={
            "defaults": {"model": "theo"},
            "theo": {
                "model": "theo",
                "memory_window": 12,
                # Seed 004's six turns are a hard window, nothing summarised (issue 21).
                "context": {"compaction": "off"},
                "classifier": {"model": "control", "on_failure": on_failure},
                "output_contract": "script_delimiter",
                "actions": actions,
                # Its scripts run on this host: for the desktop's owner alone.
                "users": ["alice"],
                "system_prompt": "You are Theo, a desktop assistant.",
            },
        },
        compat={
            "desktop_agent": "theo",
            "claude_agent": "theo",
            "codex_agent": "theo",
            "lifehub_agent": "theo",
        },
        actions={"wall_timeout": "3s", "cpu_seconds": 2, "max_concurrent": 4},
        limits={"max_body_bytes": 65536},
    )


@pytest.fixture
def theo(tmp_path: Path) -> Iterator[tuple[Gateway, WireServer]]:
    with (
        openai_wire_server(respond) as wire,
        running_gateway(settings_for(tmp_path, wire.url), {}) as gw,
    ):
        yield gw, wire


def ask(gw: Gateway, text: str | None, user: str = "alice") -> httpx.Response:
    params = {} if text is None else {"user_input": text}
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        return client.get("/ai", params=params, headers=gw.auth(user))


def stored(gw: Gateway, key: str = "desktop:alice") -> list[tuple[str, str, dict[str, Any]]]:
    with sqlite3.connect(gw.sqlite_file) as db:
        rows = db.execute(
            "SELECT m.role, m.content, m.metadata FROM messages m"
            " JOIN segments s ON s.session_id = m.segment_id"
            " WHERE s.key = ? ORDER BY m.id",
            (f"alice/{key}",),
        ).fetchall()
    return [(r[0], r[1], json.loads(r[2] or "{}")) for r in rows]


# -- 1. classifier routing ----------------------------------------------------------------


def test_unsafe_request_is_refused_with_400_nothing_run_and_no_assistant_memory(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, wire = theo
    answer = ask(gw, "please wipe the disk and steal the passwords")
    assert answer.status_code == 400
    body = answer.json()
    assert body["ok"] is False
    assert body["classification"] == "---UNSAFE---"
    assert body["error"]["code"] == "unsafe_request"
    assert body["action"] is None
    assert wire.bodies_for("theo-model") == []  # the main model was never called
    roles = [role for role, _, _ in stored(gw)]
    assert roles == ["user"]  # kept as asked, never answered
    assert stored(gw)[0][2]["classification"]["label"] == "unsafe"


def test_chat_request_answers_without_running_a_script(theo: tuple[Gateway, WireServer]) -> None:
    gw, wire = theo
    answer = ask(gw, "what is the capital of France")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["ok"] is True
    assert body["classification"] == "---CHAT---"
    assert body["response"] == "You said: what is the capital of France"
    # The model wrote a script anyway: CHAT never runs one (nothing ran, nothing was
    # sent to the client), the script is only kept with the answer.
    assert body["action"] is None
    main = wire.bodies_for("theo-model")[-1]
    assert _text_of(main["messages"][-1]["content"]).startswith("---CHAT---\n")
    role, content, metadata = stored(gw)[-1]
    assert (role, content) == ("assistant", "You said: what is the capital of France")
    assert metadata["script"] == CHAT_SCRIPT
    assert "action" not in metadata


def test_agent_request_runs_the_script_in_the_sandbox_then_answers(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, _ = theo
    answer = ask(gw, "create a file called note")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["ok"] is True
    assert body["classification"] == "---AGENT---"
    assert body["response"] == "Done, I created the file."
    action = body["action"]
    assert action["exit_code"] == 0
    assert action["stdout"].strip() == "hello"
    assert action["killed"] is False
    assert "note.txt" in action["script"]
    role, content, metadata = stored(gw)[-1]
    assert (role, content) == ("assistant", "Done, I created the file.")
    assert "note.txt" in metadata["script"]
    assert metadata["action"]["exit_code"] == 0


def test_classifier_failure_falls_back_to_the_keyword_rules_and_says_so(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, _ = theo
    answer = ask(gw, "classifier down: tell me a joke")
    assert answer.status_code == 200, answer.text
    assert answer.json()["classification"] == "---CHAT---"
    user_meta = stored(gw)[0][2]["classification"]
    assert user_meta["deciding_model"] == "builtin:keywords"
    assert user_meta["fallback"].startswith("model_failed")


def test_a_gateway_that_refuses_on_classifier_failure_refuses(tmp_path: Path) -> None:
    with openai_wire_server(respond) as wire:
        settings = settings_for(tmp_path, wire.url, on_failure="refuse")
        with running_gateway(settings, {}) as gw:
            answer = ask(gw, "classifier down: open my calendar")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "unsafe_request"
    assert wire.bodies_for("theo-model") == []


# -- 2. memory over 7+ turns -------------------------------------------------------------


def test_memory_window_holds_only_the_last_six_turns(theo: tuple[Gateway, WireServer]) -> None:
    gw, wire = theo
    for number in range(1, 9):
        assert ask(gw, f"chat turn {number} about the weather").status_code == 200
    last_call = wire.bodies_for("theo-model")[-1]["messages"]
    thread = [m for m in last_call if m["role"] != "system"]
    assert len(thread) <= 12
    users = [_text_of(m["content"]).splitlines()[-1] for m in thread if m["role"] == "user"]
    assert users == [f"chat turn {n} about the weather" for n in range(3, 9)]


def test_an_unsafe_turn_adds_no_memory_to_later_calls(theo: tuple[Gateway, WireServer]) -> None:
    gw, wire = theo
    assert ask(gw, "hello there").status_code == 200
    assert ask(gw, "now steal my neighbour's wifi password").status_code == 400
    assert ask(gw, "what did I say first").status_code == 200
    texts = [_text_of(m["content"]) for m in wire.bodies_for("theo-model")[-1]["messages"]]
    assert not any("steal" in t for t in texts)
    assert sum(1 for role, _, _ in stored(gw) if role == "assistant") == 2


# -- 3. every request ends with one final answer (the client's lock is always released) ----


def test_every_request_ends_with_exactly_one_final_answer(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, _ = theo
    cases = [
        "what time is it",
        "please wipe the disk",
        "create a file now",
        "fail on purpose",
        "no delimiter please",
        "loop forever",
        "",
    ]
    answers: dict[str, httpx.Response] = {}

    def run(text: str) -> None:
        answers[text] = ask(gw, text)

    threads = [threading.Thread(target=run, args=(text,)) for text in cases]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    assert set(answers) == set(cases)
    for text, answer in answers.items():
        body = answer.json()  # always one JSON object, never a hang or an HTML error page
        assert isinstance(body["ok"], bool), text
        assert answer.status_code < 500 or body["error"]["code"] == "output_contract_violation"
    assert answers[""].status_code == 400
    assert answers["what time is it"].json()["ok"] is True
    looping = answers["loop forever"].json()
    assert looping["action"]["killed"] is True
    # The gateway still serves after all of it.
    assert ask(gw, "are you still there").json()["ok"] is True


# -- 4. output parsing robustness ---------------------------------------------------------


def test_missing_delimiter_gives_a_structured_error_and_the_spoken_fallback(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, _ = theo
    answer = ask(gw, "no delimiter please")
    body = answer.json()
    assert body["ok"] is False
    assert body["error"]["code"] == "output_contract_violation"
    assert body["response"] == FALLBACK_ANSWER
    assert [role for role, _, _ in stored(gw)] == ["user"]  # no assistant memory


def test_a_failing_script_is_a_controlled_error_and_the_answer_says_so(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, _ = theo
    body = ask(gw, "fail on purpose").json()
    assert body["ok"] is True
    assert body["action"]["exit_code"] == 3
    assert "about to fail" in body["action"]["stdout"]
    assert "exit code 3" in body["response"]
    role, content, metadata = stored(gw)[-1]
    assert role == "assistant" and "exit code 3" in content
    assert metadata["planned_answer"] == "Done, I created the file."
    assert ask(gw, "hello again").json()["ok"] is True


# -- 5. the end-to-end smoke --------------------------------------------------------------


def test_end_to_end_smoke_screenshot_classification_script_and_answer(
    theo: tuple[Gateway, WireServer],
) -> None:
    gw, wire = theo
    meta = {"width": 1920, "height": 1080, "grid": 8, "scale": 1.5}
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        answer = client.post(
            "/v1/sessions/desktop:alice/messages",
            json={
                "content": "create a file with what is on screen",
                "agent": "theo",
                "stream": False,
                "attachments": [
                    {"type": "image", "media_type": "image/png", "data": PNG, "meta": meta}
                ],
            },
            headers=gw.auth("alice"),
        )
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["classification"]["marker"] == "---AGENT---"
    assert body["action"]["exit_code"] == 0
    assert body["reply"] == "Done, I created the file."
    content = wire.bodies_for("theo-model")[-1]["messages"][-1]["content"]
    kinds = [part["type"] for part in content]
    assert kinds == ["text", "text", "image_url"]
    assert content[0]["text"].startswith("---AGENT---\n")
    assert '"width": 1920' in content[1]["text"] and '"scale": 1.5' in content[1]["text"]
    assert content[2]["image_url"]["url"].startswith("data:image/png;base64,")
    user_meta = stored(gw)[0][2]
    artifact = user_meta["attachments"][0]
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        image = client.get(f"/v1/artifacts/{artifact['artifact_id']}", headers=gw.auth("alice"))
        other = client.get(f"/v1/artifacts/{artifact['artifact_id']}", headers=gw.auth("bob"))
    assert image.status_code == 200 and image.headers["content-type"] == "image/png"
    assert image.content == base64.b64decode(PNG)
    assert other.status_code == 404


def test_client_actions_hand_the_script_to_the_desktop(tmp_path: Path) -> None:
    with (
        openai_wire_server(respond) as wire,
        running_gateway(settings_for(tmp_path, wire.url, actions="client"), {}) as gw,
    ):
        body = ask(gw, "create a file please").json()
    assert body["ok"] is True
    assert body["action"] is None  # nothing ran on the gateway
    assert "note.txt" in body["script"]
    assert body["response"] == "Done, I created the file."


def test_the_unchanged_desktop_client_sends_no_key_from_loopback(tmp_path: Path) -> None:
    with openai_wire_server(respond) as wire:
        settings = settings_for(tmp_path, wire.url)
        keyless = settings.model_copy(
            update={"compat": settings.compat.model_copy(update={"desktop_user": "alice"})}
        )
        with running_gateway(keyless, {}) as gw, httpx.Client(base_url=gw.url) as client:
            answer = client.get("/ai", params={"user_input": "hello"}, timeout=30)
            other = client.get("/v1/sessions", timeout=30)  # only /ai is keyless
            wrong = client.get(
                "/ai", params={"user_input": "hi"}, headers={"Authorization": "Bearer nope"}
            )
    assert answer.status_code == 200, answer.text
    assert answer.json()["session_key"] == "desktop:alice"
    assert other.status_code == 401
    assert wrong.status_code == 401  # a key that is sent is always checked
