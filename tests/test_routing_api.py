"""Routing through the real transports: `POST /v1/chat`, `/v1/ws` without a key and the
OpenAI route without `X-Session-Key` all go through one routing function (DESIGN.md §8);
a mode routes only when an admin enabled it for the user and the user unlocked it."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.sync.client import connect

from sessiongate.models.base import ReplyModel, WireMessage
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway
from tests.support.helpers import ScriptedModel


def _named(name: str) -> ScriptedModel:
    def reply(messages: Sequence[WireMessage]) -> str:
        return f"{name} answers"

    return ScriptedModel(name, reply)


@pytest.fixture
def gw(tmp_path: Path) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path,
        agents={
            "defaults": {"model": "scripted"},
            "main": {},
            "night": {"model": "night"},
            "voice": {"model": "voice"},
        },
        modes={"private": {"agent": "night", "unlock_ttl": "10m"}, "work": {}},
        routes=[
            {"when": {"channel": "voice"}, "agent": "voice", "key": "voice:{user}:{device}"},
            {"when": {"primary": True}, "agent": "main", "key": "agent:main:main"},
            {"agent": "main", "key": "chat:{user}"},
        ],
        # OpenAI clients without a key go by the route, not by their message lists.
        openai={"conversations": "route"},
    )
    models: dict[str, ReplyModel] = {n: _named(n) for n in ("scripted", "night", "voice")}
    with running_gateway(settings, models) as gateway:
        yield gateway


def chat(gw: Gateway, user: str, **body: Any) -> tuple[dict[str, Any], str]:
    """One streamed routed turn: the route event's fields and the reply text."""
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        answer = client.post("/v1/chat", json={"content": "hi", **body}, headers=gw.auth(user))
    assert answer.status_code == 200, answer.text
    events = parse_sse(answer.text)
    route = next(data for kind, data in events if kind == "route")
    reply = "".join(data["content"] for kind, data in events if kind == "token")
    assert events[-1][0] == "end"
    return route, reply


def call(gw: Gateway, method: str, path: str, user: str, **kwargs: Any) -> httpx.Response:
    with httpx.Client(base_url=gw.url, timeout=30) as client:
        return client.request(method, path, headers=gw.auth(user), **kwargs)


def test_routes_pick_agent_and_key_by_user_and_channel(gw: Gateway) -> None:
    route, reply = chat(gw, "prime")
    assert (route["session_key"], route["agent"], route["rule"]) == ("agent:main:main", "main", 1)
    route, _ = chat(gw, "alice")
    assert (route["session_key"], route["reason"]) == ("chat:alice", "matched")
    route, reply = chat(gw, "alice", channel="voice", device_id="kitchen")
    assert (route["session_key"], route["agent"]) == ("voice:alice:kitchen", "voice")
    assert reply == "voice answers"


def test_a_mode_routes_only_when_enabled_and_unlocked(gw: Gateway) -> None:
    route, reply = chat(gw, "alice", mode="private")
    assert (route["reason"], route["mode"], route["session_key"]) == (
        "mode_not_enabled",
        None,
        "chat:alice",
    )
    assert reply == "scripted answers"
    # A user can never enable a mode, not even their own.
    refused = call(gw, "PATCH", "/v1/users/alice", "alice", json={"modes_enabled": ["private"]})
    assert refused.status_code == 403
    assert chat(gw, "alice", mode="private")[0]["reason"] == "mode_not_enabled"
    enabled = call(gw, "PATCH", "/v1/users/alice", "root", json={"modes_enabled": ["private"]})
    assert enabled.status_code == 200, enabled.text
    assert chat(gw, "alice", mode="private")[0]["reason"] == "mode_locked"
    unlocked = call(gw, "POST", "/v1/modes/private/unlock", "alice", json={})
    assert unlocked.status_code == 200, unlocked.text
    route, reply = chat(gw, "alice", mode="private")
    assert (route["reason"], route["mode"], route["session_key"], route["agent"]) == (
        "mode_active",
        "private",
        "mode:private:alice",
        "night",
    )
    assert reply == "night answers"
    # Another user's unlock is theirs alone.
    assert chat(gw, "bob", mode="private")[0]["reason"] == "mode_not_enabled"
    assert call(gw, "POST", "/v1/modes/private/lock", "alice").status_code == 200
    route, reply = chat(gw, "alice", mode="private")
    assert (route["reason"], route["session_key"]) == ("mode_locked", "chat:alice")
    me = call(gw, "GET", "/v1/me", "alice").json()
    actions = [(u["mode"], u["locked_by"]) for u in me["unlocks"]]
    assert actions == [("private", "alice")]


def test_an_unlock_expires_by_itself(gw: Gateway) -> None:
    call(gw, "PATCH", "/v1/users/alice", "root", json={"modes_enabled": ["private"]})
    assert call(gw, "POST", "/v1/modes/private/unlock", "alice", json={"ttl": "1s"}).is_success
    assert chat(gw, "alice", mode="private")[0]["reason"] == "mode_active"
    time.sleep(1.1)
    assert chat(gw, "alice", mode="private")[0]["reason"] == "mode_locked"


def test_unknown_mode_and_hostile_labels(gw: Gateway) -> None:
    assert chat(gw, "alice", mode="nope")[0]["reason"] == "mode_unknown"
    for body in (
        {"channel": "../etc"},
        {"device_id": "a b"},
        {"channel": "x" * 65},
        {"mode": 5},
        {"mode": "x" * 65},
    ):
        answer = call(gw, "POST", "/v1/chat", "alice", json={"content": "hi", **body})
        assert 400 <= answer.status_code < 500, (body, answer.text)
        assert answer.json()["error"]["code"]


def test_the_websocket_routes_each_frame_and_names_the_mode(gw: Gateway) -> None:
    call(gw, "PATCH", "/v1/users/alice", "root", json={"modes_enabled": ["private"]})
    with connect(f"{gw.ws_url}/v1/ws") as ws:
        ws.send(gw.keys["alice"])
        assert ws.recv() == "authenticated"
        ready = json.loads(ws.recv())
        assert ready["session_id"] == "chat:alice"
        ws.send(json.dumps({"content": "hello", "mode": "private"}))
        frames = _until_complete(ws)
        route = next(f for f in frames if f["type"] == "route")
        assert route["reason"] == "mode_locked"
        assert call(gw, "POST", "/v1/modes/private/unlock", "alice", json={}).is_success
        ws.send(json.dumps({"content": "hello again", "mode": "private"}))
        frames = _until_complete(ws)
        route = next(f for f in frames if f["type"] == "route")
        assert (route["reason"], route["session_key"]) == ("mode_active", "mode:private:alice")
        assert frames[-1]["session_id"] == "mode:private:alice"


def test_the_openai_route_without_a_key_is_routed(gw: Gateway) -> None:
    answer = call(
        gw,
        "POST",
        "/v1/chat/completions",
        "alice",
        json={"model": "main", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.status_code == 200, answer.text
    assert answer.headers["x-session-key"] == "chat:alice"
    answer = call(
        gw,
        "POST",
        "/v1/chat/completions",
        "prime",
        json={"model": "main", "messages": [{"role": "user", "content": "hi"}]},
    )
    assert answer.headers["x-session-key"] == "agent:main:main"


def _until_complete(ws: Any) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = json.loads(ws.recv(timeout=10))
        frames.append(frame)
        if frame["type"] in ("complete", "error"):
            return frames
