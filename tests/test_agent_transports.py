"""Tool steps over every transport, through a real server on loopback: SSE (`/v1/chat`),
the WebSocket (`/v1/ws`), and the OpenAI-compatible route, where text-only clients see
only text and the steps ride in `sessiongate_*` fields."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import OpenAI
from websockets.asyncio.client import connect

from tests.support.agent_models import Call, ToolModel, toolbox
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway

TIMEOUT = 10


@pytest.fixture
def model() -> ToolModel:
    # Every turn: two parallel calls, then an answer.
    calls = [Call("add", {"a": 2, "b": 3}, "c1"), Call("echo", {"text": "hi"}, "c2")]
    return ToolModel(
        lambda messages, options: calls if messages[-1]["role"] == "user" else "It is 5."
    )


@pytest.fixture
def gw(tmp_path: Path, model: ToolModel) -> Iterator[Gateway]:
    settings = gateway_settings(
        tmp_path, agents={"main": {"model": model.name, "tools": ["add", "echo"]}}
    )
    with running_gateway(settings, {model.name: model}) as gateway:
        gateway.engine.tools.add_source(toolbox())
        yield gateway


def check_steps(events: list[tuple[str, dict[str, Any]]]) -> None:
    kinds = [kind for kind, _ in events]
    assert kinds.count("tool_start") == 2 and kinds.count("tool_end") == 2
    # Both calls start before the first token; every end follows its start.
    first_token = kinds.index("token") if "token" in kinds else kinds.index("message")
    assert max(i for i, k in enumerate(kinds) if k == "tool_end") < first_token
    starts = {
        d["call_id"]: {f: v for f, v in d.items() if f != "type"}
        for k, d in events
        if k == "tool_start"
    }
    ends = {d["call_id"]: d for k, d in events if k == "tool_end"}
    assert starts["c1"] == {"call_id": "c1", "name": "add", "input": {"a": 2, "b": 3}}
    assert ends["c1"]["output"] == "5" and ends["c1"]["status"] == "ok"
    assert ends["c2"]["name"] == "echo" and ends["c2"]["output"].endswith("hi")
    assert all(
        isinstance(e["duration_ms"], int | float) and e["duration_ms"] >= 0 for e in ends.values()
    )


def test_sse_carries_tool_start_and_tool_end(gw: Gateway) -> None:
    with httpx.Client(base_url=gw.url, timeout=TIMEOUT) as client:
        answer = client.post("/v1/chat", json={"content": "add 2 and 3"}, headers=gw.auth("alice"))
    assert answer.status_code == 200
    events = parse_sse(answer.text)
    check_steps(events)
    assert events[-1][0] == "end"
    # (the scripted model streams word by word, each with a space after it)
    assert "".join(d["content"] for k, d in events if k == "token").strip() == "It is 5."


def test_websocket_carries_tool_frames(gw: Gateway) -> None:
    async def run() -> list[tuple[str, dict[str, Any]]]:
        async with connect(gw.ws_url + "/v1/ws", open_timeout=TIMEOUT, proxy=None) as ws:
            await ws.send(gw.keys["alice"])
            assert await asyncio.wait_for(ws.recv(), TIMEOUT) == "authenticated"
            ready = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            assert ready["type"] == "ready"
            await ws.send(json.dumps({"content": "add 2 and 3", "session_id": "ws"}))
            frames = []
            while True:
                frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
                frames.append((frame["type"], frame))
                if frame["type"] in ("complete", "error"):
                    return frames

    frames = asyncio.run(run())
    assert frames[-1][0] == "complete"
    # The WebSocket frames carry the same fields as the SSE events (plus the frame's own).
    trimmed = [
        # `event_id` is the socket's resume point (docs/api.md), not a field of the step.
        (k, {f: v for f, v in d.items() if f not in ("type", "timestamp", "event_id")})
        for k, d in frames
    ]
    check_steps(trimmed)
    assert "".join(d["content"] for k, d in frames if k == "message").strip() == "It is 5."


def test_openai_route_streams_text_only_with_steps_in_sessiongate_fields(gw: Gateway) -> None:
    client = OpenAI(base_url=gw.url + "/v1", api_key=gw.keys["alice"], max_retries=0)
    chunks = list(
        client.chat.completions.create(
            model="main",
            messages=[{"role": "user", "content": "add 2 and 3"}],
            stream=True,
            extra_headers={"X-Session-Key": "sdk"},
        )
    )
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text.strip() == "It is 5."
    extras = [c.model_extra or {} for c in chunks]
    starts = [e["sessiongate_tool_start"] for e in extras if "sessiongate_tool_start" in e]
    ends = [e["sessiongate_tool_end"] for e in extras if "sessiongate_tool_end" in e]
    assert sorted(s["name"] for s in starts) == ["add", "echo"]
    assert {e["call_id"]: e["output"] for e in ends}["c1"] == "5"

    whole = client.chat.completions.create(
        model="main",
        messages=[{"role": "user", "content": "again"}],
        extra_headers={"X-Session-Key": "sdk"},
    )
    assert (whole.choices[0].message.content or "").strip() == "It is 5."
    steps = (whole.model_extra or {})["sessiongate_tool_steps"]
    assert steps and {s["name"] for s in steps} >= {"add"}
