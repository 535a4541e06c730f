"""What `sessiongate serve` (a subprocess, its model a `command` relay with `offline` as
its fallback) records and reports of conversations, end to end:

- the offline stand-in's answer is kept but never reaches the model again, the question it
  answered does;
- usage the gateway counted says `estimated: true`: SSE `end`, the OpenAI-compatible
  `usage` (the official SDK, streamed and not) and the Responses API;
- titles in `sessions list`, set with `PATCH`;
- `sessions show` and `sessions export` agree on the first segment's reason (`first`);
- `/api/health` counts a key seed 001's app made as soon as its turn ends, and the app's
  empty frame is skipped without an error frame.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from websockets.sync.client import connect

from sessiongate.core.context import STAND_IN_SIGNATURE
from tests.support.served import Served, served_gateway

#: A reply model that fails while the flag file exists (the fallback, `offline`, stands in)
#: and otherwise says what it was sent: how many user and assistant messages, and whether
#: any held the stand-in's words.
RELAY = """\
import json, os, sys
if os.path.exists(sys.argv[1]):
    sys.stderr.write("down for the test")
    sys.exit(3)
body = json.load(sys.stdin)
said = [m for m in body["messages"] if m["role"] in ("user", "assistant")]
text = lambda m: m["content"] if isinstance(m["content"], str) else json.dumps(m["content"])
users = sum(1 for m in said if m["role"] == "user")
answers = sum(1 for m in said if m["role"] == "assistant")
stand_in = any(SIGNATURE in text(m) for m in said)
sys.stdout.write(f"users={users} answers={answers} stand_in={stand_in} last={text(said[-1])}")
"""
QUESTION = "Plant tomatoes by the south fence this spring, with basil between them"


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Path]]:
    directory = tmp_path_factory.mktemp("served-records")
    flag = directory / "model-down"
    script = directory / "relay.py"
    script.write_text(RELAY.replace("SIGNATURE", repr(STAND_IN_SIGNATURE)), encoding="utf-8")
    command = json.dumps([sys.executable, str(script), str(flag)])
    config = (
        f'[models.relay]\nprovider = "command"\ncommand = {command}\n'
        '[agents.defaults]\nmodel = "relay"\nfallback_models = ["offline"]\n'
        "[agents.main]\n"
    )
    with served_gateway(directory, config, {"alice": ()}) as gateway:
        yield gateway, flag


def sse_events(response: httpx.Response) -> list[dict[str, Any]]:
    return [
        json.loads(line.removeprefix("data: "))
        for line in response.text.splitlines()
        if line.startswith("data: ")
    ]


def turn(served: Served, key: str, content: str) -> list[dict[str, Any]]:
    with served.client("alice") as client:
        answer = client.post(f"/v1/sessions/{key}/messages", json={"content": content})
    assert answer.status_code == 200, answer.text
    return sse_events(answer)


def reply_of(events: list[dict[str, Any]]) -> str:
    return "".join(e["content"] for e in events if e["type"] == "token")


def test_a_stand_in_answer_is_kept_out_of_the_next_context_and_usage_says_estimated(
    served: tuple[Served, Path],
) -> None:
    gateway, flag = served
    flag.touch()
    try:
        down = turn(gateway, "garden", QUESTION)
    finally:
        flag.unlink()
    assert STAND_IN_SIGNATURE in reply_of(down)
    assert down[-1]["type"] == "end" and down[-1]["usage"]["estimated"] is True

    back = turn(gateway, "garden", "and the beans?")
    # The relay saw both questions and no answer: the stand-in's stayed out.
    assert reply_of(back).startswith("users=2 answers=0 stand_in=False last=and the beans?")
    assert back[-1]["usage"]["estimated"] is True  # a command reports no usage
    with gateway.client("alice") as client:
        shown = client.get("/v1/sessions/garden").json()
        sid = shown["latest"]["session_id"]
        stored = client.get(f"/v1/sessions/garden/segments/{sid}/messages").json()["messages"]
    assert [m["metadata"].get("offline") for m in stored] == [None, True, None, None]
    assert stored[1]["metadata"]["usage"]["estimated"] is True


def test_the_official_sdk_reads_estimated_usage_streamed_and_not(
    served: tuple[Served, Path],
) -> None:
    gateway, _ = served
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key=gateway.keys["alice"], max_retries=0
    ) as client:
        whole = client.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "Which beans climb best?"}]
        )
        assert whole.usage is not None and whole.usage.total_tokens > 0
        assert (whole.usage.model_extra or {}).get("estimated") is True
        stream = client.chat.completions.create(
            model="main",
            messages=[{"role": "user", "content": "Streamed: how deep do carrots go?"}],
            stream=True,
            stream_options={"include_usage": True},
        )
        usages = [chunk.usage for chunk in stream if chunk.usage is not None]
        assert len(usages) == 1 and (usages[0].model_extra or {}).get("estimated") is True
        response = client.responses.create(model="main", input="Responses: when to sow peas?")
        assert response.usage is not None and response.usage.input_tokens > 0
        assert (response.usage.model_extra or {}).get("estimated") is True


def test_titles_in_sessions_list_and_patch(served: tuple[Served, Path]) -> None:
    gateway, _ = served
    turn(gateway, "plain", "hello there")
    turn(gateway, "titled", QUESTION)
    with openai.OpenAI(
        base_url=gateway.url + "/v1", api_key=gateway.keys["alice"], max_retries=0
    ) as sdk:
        sdk.chat.completions.create(
            model="main", messages=[{"role": "user", "content": "Which peas climb best?"}]
        )

    def listed() -> dict[str, str]:
        done = gateway.cli("sessions", "list")
        assert done.returncode == 0, done.stderr
        header, *rows = [line.split("\t") for line in done.stdout.splitlines()]
        assert header[0] == "key" and header[-1] == "title"
        return {row[0]: row[-1] for row in rows}

    titles = listed()
    assert titles["plain"] == "hello there"
    assert titles["titled"] == "Plant tomatoes by the south fence this spring, with basil\u2026"
    chats = [key for key in titles if key.startswith("oai:chat:")]
    assert "Which peas climb best?" in [titles[key] for key in chats]

    with gateway.client("alice") as client:
        renamed = client.patch("/v1/sessions/titled", json={"title": "Spring garden"})
        assert renamed.status_code == 200 and renamed.json()["title"] == "Spring garden"
        refused = client.patch("/v1/sessions/titled", json={"title": "two\nlines"})
        assert refused.status_code == 400
        assert refused.json()["error"]["code"] == "invalid_title"
    assert listed()["titled"] == "Spring garden"
    shown = gateway.cli("sessions", "show", "titled")
    assert "title: Spring garden" in shown.stdout


def test_show_and_export_agree_on_the_first_segments_reason(served: tuple[Served, Path]) -> None:
    gateway, _ = served
    turn(gateway, "rotated", "one")
    turn(gateway, "rotated", "/new two")
    shown = gateway.cli("sessions", "show", "rotated")
    assert shown.returncode == 0, shown.stderr
    rows = [line.split("\t") for line in shown.stdout.splitlines() if "\t" in line]
    reasons = [row[3] for row in rows[1:]]
    exported = gateway.cli("sessions", "export", "rotated")
    assert exported.returncode == 0, exported.stderr
    lines = [json.loads(line) for line in exported.stdout.splitlines()]
    in_export = [line["created_reason"] for line in lines if line["type"] == "segment"]
    assert reasons == in_export == ["first", "manual"]


def test_health_counts_a_seed_key_once_its_turn_ends_and_empty_frames_pass_quietly(
    served: tuple[Served, Path],
) -> None:
    gateway, _ = served

    def claude_keys() -> int:
        health = httpx.get(gateway.url + "/api/health", timeout=10).json()
        return int(health["sessions"]["by_agent"]["claude"])

    before = claude_keys()  # read now: within a second it would be reused as it was
    ws_url = gateway.url.replace("http://", "ws://") + "/api/claude/ws?session_id=phone-1"
    with connect(ws_url, proxy=None) as ws:
        ws.send(gateway.keys["alice"])
        assert ws.recv(timeout=10) == "authenticated"
        assert json.loads(ws.recv(timeout=10))["type"] == "ready"
        ws.send(json.dumps({"content": "", "device_id": "iphone"}))  # skipped, no answer
        ws.send(json.dumps({"content": "first words", "device_id": "iphone"}))
        frames: list[dict[str, Any]] = []
        while not frames or frames[-1]["type"] not in ("complete", "error"):
            frames.append(json.loads(ws.recv(timeout=30)))
        assert frames[-1]["type"] == "complete", frames
        assert frames[-1]["frame"] == 2  # the empty one counted, unanswered
        assert claude_keys() == before + 1
