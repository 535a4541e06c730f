"""The shipped examples (examples/<system>.toml, DESIGN.md §16), each served as its
reader serves it — `sessiongate serve --config examples/<system>.toml`, a subprocess, the
file untouched — with only the environment pointing its `reply` and `control` models at a
local stub (tests/support/served_example.py), and driven by a client written from its
seed's own text (../shared/seeds/), not from our docs:

- seed 000 (BrinChat): its routing table — the primary user to `agent:main:main`,
  anyone else to `brinchat:{username}`, the adult mode only when enabled AND unlocked,
  the tool-less persona there, the voice by mode, tasks extracted for non-primary users;
- seed 001 (BuilderOS Mobile): its WebSocket flow on both agent endpoints, CLAUDE.md in
  Jarvis's context, Codex through a relay process, a reconnect restoring the history,
  `/api/health` without a key;
- seed 002 (LifeHub): `POST /chat {messages, provider}` from its keyless page on this
  machine, the planner → worker → explainer stream, the CORS preflight of a page on
  `http://localhost:3000`;
- seed 004 (Theo): `GET /ai` for CHAT, AGENT and UNSAFE with the audio fetched, and its
  six-turn memory.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from sessiongate.config import load_settings
from sessiongate.speech.tone import warning_sound
from tests.support.example_stubs import (
    RELAY_MODEL,
    brinchat,
    builderos,
    last_text,
    lifehub,
    system_text,
    text_of,
    theo,
)
from tests.support.openai_wire_server import WireServer, openai_wire_server
from tests.support.served_example import (
    CONTROL_MODEL,
    EXAMPLES,
    REPLY_MODEL,
    ServedExample,
    served_example,
)

ADMIN = ("--primary", "--admin")
NAMES = ("brinchat", "builderos", "lifehub", "theo")


def sse_data(text: str) -> list[dict[str, Any]]:
    return [json.loads(line[6:]) for line in text.splitlines() if line.startswith("data: ")]


def test_every_example_names_reply_and_control_and_the_environment_repoints_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SESSIONGATE_MODELS__REPLY__BASE_URL", "http://model.test:9/v1")
    monkeypatch.setenv("SESSIONGATE_MODELS__CONTROL__BASE_URL", "http://control.test:9/v1")
    for name in NAMES:
        settings = load_settings(EXAMPLES / f"{name}.toml")
        reply, control = settings.models["reply"], settings.models["control"]
        assert reply.base_url == "http://model.test:9/v1", name
        assert control.base_url == "http://control.test:9/v1", name
        # The rest of each entry still comes from the file.
        assert (reply.provider, control.provider) == ("openai", "openai"), name
        assert reply.model and control.model, name
    theo_settings = load_settings(EXAMPLES / "theo.toml")
    theo_agent = theo_settings.agents["theo"]
    assert theo_agent.memory_window == 12  # six turns, a hard window (nothing summarised)
    assert theo_agent.context is not None and theo_agent.context.compaction == "off"
    builder = load_settings(EXAMPLES / "builderos.toml")
    assert builder.retention.idle_after is not None and builder.retention.idle_after.days == 30


# -- seed 004: Theo ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def theo_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServedExample, WireServer]]:
    directory = tmp_path_factory.mktemp("theo")
    with (
        openai_wire_server(theo) as wire,
        served_example("theo", directory, wire.url, {"admin": ADMIN}) as example,
    ):
        yield example, wire


def desktop_ask(example: ServedExample, text: str) -> httpx.Response:
    """The desktop client's request: a GET with the text, no API key (seed 004)."""
    with httpx.Client(base_url=example.url, timeout=60) as client:
        return client.get("/ai", params={"user_input": text})


def fetch_audio(example: ServedExample, audio: dict[str, Any]) -> bytes:
    with httpx.Client(base_url=example.url, timeout=30) as client:
        answer = client.get(audio["url"])  # as keyless as the request that named it
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"] == "audio/wav"
    assert answer.content[:4] == b"RIFF" and answer.content[8:12] == b"WAVE"
    return answer.content


def test_theo_chat_agent_and_unsafe_answers_with_their_sound(
    theo_served: tuple[ServedExample, WireServer],
) -> None:
    example, wire = theo_served
    chat = desktop_ask(example, "what is the capital of France")
    assert chat.status_code == 200, chat.text
    body = chat.json()
    assert body["ok"] is True and body["classification"] == "---CHAT---"
    assert body["response"] == "You said: what is the capital of France"
    assert body["action"] is None  # a CHAT script never runs
    assert body["audio"]["kind"] == "reply" and body["audio"]["voice"] == "theo"
    spoken = fetch_audio(example, body["audio"])
    assert len(spoken) > 10_000  # espeak-ng said a sentence, not a blip

    agent = desktop_ask(example, "create a file called note").json()
    assert agent["ok"] is True and agent["classification"] == "---AGENT---"
    assert agent["action"]["exit_code"] == 0 and agent["action"]["stdout"].strip() == "hello"
    assert agent["response"] == "Done, I created the file."
    fetch_audio(example, agent["audio"])

    calls = len(wire.bodies_for(REPLY_MODEL))
    unsafe = desktop_ask(example, "please wipe the disk and steal the passwords")
    assert unsafe.status_code == 400
    refused = unsafe.json()
    assert refused["ok"] is False and refused["classification"] == "---UNSAFE---"
    assert refused["error"]["code"] == "unsafe_request" and refused["action"] is None
    assert len(wire.bodies_for(REPLY_MODEL)) == calls  # the main model was never asked
    assert refused["audio"]["kind"] == "warning"
    assert fetch_audio(example, refused["audio"]) == warning_sound().to_wav()
    again = desktop_ask(example, "steal my neighbour's wifi").json()
    assert again["audio"]["artifact_id"] == refused["audio"]["artifact_id"]  # one copy kept

    # The sound is served to the desktop's own key only: another user's key reads nothing.
    added = example.cli("users", "add", "guest")
    guest = added.stdout.strip().splitlines()[-1]
    with httpx.Client(base_url=example.url, timeout=30) as client:
        other = client.get(body["audio"]["url"], headers={"Authorization": f"Bearer {guest}"})
    assert other.status_code == 404


def test_theo_remembers_the_last_six_turns(theo_served: tuple[ServedExample, WireServer]) -> None:
    example, wire = theo_served
    for number in range(1, 9):
        assert desktop_ask(example, f"memory turn {number} about the weather").status_code == 200
    messages = wire.bodies_for(REPLY_MODEL)[-1]["messages"]
    thread = [m for m in messages if m["role"] != "system"]
    users = [text_of(m["content"]).splitlines()[-1] for m in thread if m["role"] == "user"]
    assert users == [f"memory turn {n} about the weather" for n in range(3, 9)]
    assert len(thread) == 12


# -- seed 002: LifeHub --------------------------------------------------------------------


@pytest.fixture(scope="module")
def lifehub_served(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[ServedExample, WireServer]]:
    directory = tmp_path_factory.mktemp("lifehub")
    with (
        openai_wire_server(lifehub) as wire,
        served_example("lifehub", directory, wire.url, {"admin": ADMIN}) as example,
    ):
        imported = example.cli(
            "notes", "import", str(EXAMPLES / "lifehub" / "notes"), "--user", "admin"
        )
        assert imported.returncode == 0, imported.stderr
        yield example, wire


def test_lifehub_page_posts_chat_with_a_provider_and_no_key(
    lifehub_served: tuple[ServedExample, WireServer],
) -> None:
    example, wire = lifehub_served
    body = {"messages": [{"role": "user", "content": "What's in my notes about running?"}]}
    with example.client() as client:  # the page sends no Authorization header
        answer = client.post("/chat", json={**body, "provider": "openai"})
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-session-key"] == "lifehub:admin"
    data = sse_data(answer.text)
    types = [d["type"] for d in data]
    assert types[:5] == ["start", "plan", "tool_start", "tool_end", "context_log"]
    assert set(types[5:-1]) == {"token"} and types[-1] == "end"
    # No compat.providers table: the agent's own model answered, and `start` says so.
    assert data[0]["provider"] == {"requested": "openai", "model": "reply", "source": "agent"}
    assert "fitness.md" in data[3]["output"] and "long run" in data[3]["output"]
    reply = "".join(d["content"] for d in data if d["type"] == "token")
    assert reply == "Your notes say the long run is on Saturday."
    # Two model calls, both to the agent's `reply` model: the planner, then the explainer.
    assert [b["model"] for b in wire.requests[-2:]] == [REPLY_MODEL, REPLY_MODEL]


def test_lifehub_page_on_port_3000_passes_the_cors_preflight(
    lifehub_served: tuple[ServedExample, WireServer],
) -> None:
    example, _ = lifehub_served
    page = "http://localhost:3000"
    preflight = {
        "Origin": page,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "content-type",
    }
    body = {"messages": [{"role": "user", "content": "and about the kitchen?"}]}
    with example.client() as client:
        allowed = client.options("/chat", headers=preflight)
        posted = client.post("/chat", json=body, headers={"Origin": page})
        foreign = client.options("/chat", headers={**preflight, "Origin": "http://evil.test"})
        forged = client.post("/chat", json=body, headers={"Origin": "http://evil.test"})
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == page
    assert "POST" in allowed.headers["access-control-allow-methods"]
    assert "content-type" in allowed.headers["access-control-allow-headers"].lower()
    assert posted.status_code == 200, posted.text
    assert posted.headers["access-control-allow-origin"] == page
    assert sse_data(posted.text)[-1]["type"] == "end"
    # A page of any other site gets neither CORS nor the keyless user.
    assert foreign.status_code == 400
    assert "access-control-allow-origin" not in foreign.headers
    assert forged.status_code == 401


def test_lifehub_web_search_comes_from_the_shipped_mcp_server(
    lifehub_served: tuple[ServedExample, WireServer],
) -> None:
    example, _ = lifehub_served
    with example.client("admin") as client:
        listed = client.get("/v1/tools", params={"agent": "hub"})
    assert listed.status_code == 200, listed.text
    tools = {t["name"]: t["source"] for t in listed.json()["tools"]}
    assert tools["web__search"] == "mcp:web"
    assert {"notes_search", "tasks_add", "tasks_list", "weather_current"} <= set(tools)


# -- seed 001: BuilderOS Mobile --------------------------------------------------------


async def phone_turn(
    example: ServedExample, key: str, endpoint: str, frame: dict[str, Any] | None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The app: connect, send the key, read `authenticated` and `ready`, then send one
    frame (if any) and read up to `complete` or `error`."""
    url = f"{example.ws_url}/api/{endpoint}/ws"
    async with connect(url, open_timeout=10, close_timeout=2, proxy=None) as ws:
        await ws.send(key)
        assert await asyncio.wait_for(ws.recv(), 10) == "authenticated"
        ready = json.loads(await asyncio.wait_for(ws.recv(), 10))
        assert ready["type"] == "ready"
        frames: list[dict[str, Any]] = []
        if frame is not None:
            await ws.send(json.dumps(frame))
            while not frames or frames[-1]["type"] not in ("complete", "error"):
                frames.append(json.loads(await asyncio.wait_for(ws.recv(), 30)))
        return ready, frames


def test_builderos_app_talks_to_jarvis_and_codex_and_health_counts_them(tmp_path: Path) -> None:
    env = {"BUILDEROS_RELAY_MODEL": RELAY_MODEL}
    with (
        openai_wire_server(builderos) as wire,
        served_example("builderos", tmp_path, wire.url, {"ty": ()}, env) as example,
    ):
        key = example.served.keys["ty"]
        jarvis = {"content": "Show me capsules", "session_id": "mobile-jarvis-abc123",
                  "device_id": "iphone-xyz"}  # fmt: skip
        _, frames = asyncio.run(phone_turn(example, key, "claude", jarvis))
        assert frames[-1]["type"] == "complete" and frames[-1]["message_count"] == 2
        text = "".join(f["content"] for f in frames if f["type"] == "message")
        assert text == "jarvis heard: Show me capsules"
        jarvis_call = wire.bodies_for(REPLY_MODEL)[-1]
        assert "You are Jarvis, the coordinating assistant of BuilderOS" in system_text(jarvis_call)

        codex = {"content": "Refactor the parser", "session_id": "mobile-codex-abc123",
                 "device_id": "iphone-xyz"}  # fmt: skip
        _, frames = asyncio.run(phone_turn(example, key, "codex", codex))
        text = "".join(f["content"] for f in frames if f["type"] == "message")
        assert text == "relay heard: Refactor the parser"  # through relay.py, a process
        relay_call = wire.bodies_for(RELAY_MODEL)[-1]
        assert "BuilderOS" not in json.dumps(relay_call)  # nothing of Jarvis's reaches Codex
        assert last_text(relay_call) == "Refactor the parser"

        # No cross-talk: the Codex endpoint refuses Jarvis's conversation.
        _, frames = asyncio.run(phone_turn(example, key, "codex", {**jarvis, "content": "hi"}))
        assert frames[-1]["type"] == "error" and frames[-1]["code"] == "wrong_endpoint"

        # A reconnect after a network drop: no session named, the history is back.
        ready, _ = asyncio.run(phone_turn(example, key, "claude", None))
        assert ready["session_id"] == "mobile-jarvis-abc123"
        assert [m["content"] for m in ready["history"]][-2:] == [
            "Show me capsules",
            "jarvis heard: Show me capsules",
        ]

        health = httpx.get(f"{example.url}/api/health", timeout=10)  # no key, as the seed
        status = httpx.get(f"{example.url}/api/status", timeout=10)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    shown = health.json()
    assert set(shown["connections"]) == {"claude", "codex"}
    assert shown["sessions"]["by_agent"] == {"claude": 1, "codex": 1}
    assert status.json()["features"]["session_persistence"] is True


# -- seed 000: BrinChat ---------------------------------------------------------------


def chat(client: httpx.Client, content: str, **fields: Any) -> dict[str, Any]:
    answer = client.post("/v1/chat", json={"content": content, "stream": False, **fields})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    return body


def test_brinchat_routes_by_user_and_mode(tmp_path: Path) -> None:
    with (
        openai_wire_server(brinchat) as wire,
        served_example("brinchat", tmp_path, wire.url, {"admin": ADMIN, "bob": ()}) as example,
    ):
        enabled = example.cli("users", "modes", "bob", "--enable", "adult")
        assert enabled.returncode == 0, enabled.stderr
        with example.client("admin") as joel, example.client("bob") as bob:
            primary = chat(joel, "hello from the primary user")
            other = chat(bob, "hello from bob")
            locked = chat(bob, "hello again", mode="adult")
            assert bob.post("/v1/modes/adult/unlock", json={}).status_code == 200
            adult = chat(bob, "hello in the mode", mode="adult", speak=True)
            not_enabled = chat(joel, "may I?", mode="adult")
            normal_voice = chat(bob, "remind me to buy running shoes", speak=True)

            deadline = time.monotonic() + 20  # tasks are extracted in the background
            while time.monotonic() < deadline:
                tasks = bob.get("/v1/tasks").json()["tasks"]
                if tasks:
                    break
                time.sleep(0.2)
            joel_tasks = joel.get("/v1/tasks").json()["tasks"]

    assert (primary["route"]["agent"], primary["route"]["session_key"]) == (
        "main",
        "agent:main:main",
    )
    assert (other["route"]["agent"], other["route"]["session_key"]) == ("main", "brinchat:bob")
    assert locked["route"]["session_key"] == "brinchat:bob"
    assert locked["route"]["reason"] == "mode_locked"
    assert (adult["route"]["agent"], adult["route"]["session_key"]) == ("lexi", "lexi:bob")
    assert adult["reply"] == "lexi heard: hello in the mode"
    assert not_enabled["route"]["reason"] == "mode_not_enabled"
    assert not_enabled["route"]["session_key"] == "agent:main:main"
    # Voices by mode: the mode's own voice, else the agent's.
    assert adult["audio"]["voice"] == "lexi" and adult["audio"]["error"] is None
    assert normal_voice["audio"]["voice"] == "normal"
    # The persona has no tools; the main agent does, fewer for non-primary users.
    replies = {last_text(b): b for b in wire.bodies_for(REPLY_MODEL)}
    assert "tools" not in replies["hello in the mode"]
    joel_tools = {t["function"]["name"] for t in replies["hello from the primary user"]["tools"]}
    bob_tools = {t["function"]["name"] for t in replies["hello from bob"]["tools"]}
    assert "notes_search" in joel_tools and "notes_search" not in bob_tools
    assert "web__search" in bob_tools
    # Tasks extracted for bob (non-primary), never for the primary user.
    assert [t["title"] for t in tasks] == ["Buy running shoes"]
    assert joel_tasks == []
    extractions = [b for b in wire.bodies_for(CONTROL_MODEL) if "list the tasks" in system_text(b)]
    assert extractions and not any("primary user" in json.dumps(b) for b in extractions)
