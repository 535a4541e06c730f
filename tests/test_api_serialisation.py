"""Per-key serialisation across transports, and clients that leave mid-turn, against a real
gateway on loopback. The gateway runs in its own thread and event loop, so the model is
held with a `threading.Event` that it polls, never with an asyncio primitive."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from sessiongate.errors import ModelError
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    TextDelta,
    Usage,
    WireMessage,
)
from tests.support.gateway import Gateway, gateway_settings, running_gateway

TIMEOUT = 5.0
HOLD_LIMIT = 15.0  # a held reply gives up after this long, so a broken test cannot hang


class HeldModel:
    """Replies `reply to: <content>` word by word. A message `hold <tag> ...` stops after
    its first word until the test calls `release(tag)`."""

    name = "held"

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._gates: dict[str, tuple[threading.Event, threading.Event]] = {}
        self.log: list[tuple[str, str]] = []  # ("begin" | "end", content), in model order

    def gate(self, tag: str) -> tuple[threading.Event, threading.Event]:
        """(started, release) for `tag`, created on first use by either side."""
        with self._lock:
            return self._gates.setdefault(tag, (threading.Event(), threading.Event()))

    def release(self, tag: str) -> None:
        self.gate(tag)[1].set()

    def wait_started(self, tag: str, timeout: float = TIMEOUT) -> bool:
        return self.gate(tag)[0].wait(timeout)

    def events_for(self, content: str) -> list[str]:
        return [what for what, c in self.log if c == content]

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        content = messages[-1]["content"]
        self.log.append(("begin", content))
        words = f"reply to: {content}".split(" ")
        parts = content.split(" ")
        tag = parts[1] if parts[0] == "hold" and len(parts) > 1 else None
        for index, word in enumerate(words):
            if index == 1 and tag is not None:
                started, release = self.gate(tag)
                started.set()
                deadline = time.monotonic() + HOLD_LIMIT
                while not release.is_set():
                    if time.monotonic() > deadline:
                        raise ModelError(f"hold {tag} was never released")
                    await asyncio.sleep(0.01)
            yield TextDelta(word if index == 0 else " " + word)
            await asyncio.sleep(0)
        self.log.append(("end", content))
        yield Usage(prompt_tokens=len(messages), completion_tokens=len(words))


@pytest.fixture(scope="module")
def model() -> HeldModel:
    return HeldModel()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: HeldModel) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("serial")
    settings = gateway_settings(path, agents={"defaults": {"model": "held"}})
    with running_gateway(settings, {"held": model}) as gateway:
        yield gateway


@pytest.fixture
async def http(gw: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=gw.url, timeout=TIMEOUT, headers=gw.auth("alice")
    ) as client:
        yield client


# -- helpers ----------------------------------------------------------------------------


@asynccontextmanager
async def socket(gw: Gateway, path: str = "/v1/ws") -> AsyncIterator[ClientConnection]:
    async with connect(gw.ws_url + path, open_timeout=TIMEOUT, close_timeout=2, proxy=None) as ws:
        await ws.send(gw.keys["alice"])
        assert await asyncio.wait_for(ws.recv(), TIMEOUT) == "authenticated"
        ready = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert ready["type"] == "ready"
        yield ws


async def recv_json(ws: ClientConnection) -> dict[str, Any]:
    frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
    assert isinstance(frame, dict)
    return frame


async def reply_started(model: HeldModel, tag: str) -> bool:
    """Wait (in a worker thread, so the test's loop runs on) until `tag`'s reply is held."""
    return await asyncio.to_thread(model.wait_started, tag)


async def stored(http: httpx.AsyncClient, key: str) -> list[dict[str, Any]]:
    shown = await http.get(f"/v1/sessions/{key}")
    assert shown.status_code == 200, shown.text
    sid = shown.json()["latest"]["session_id"]
    page = await http.get(f"/v1/sessions/{key}/segments/{sid}/messages")
    assert page.status_code == 200, page.text
    return list(page.json()["messages"])


async def poll_stored(http: httpx.AsyncClient, key: str, done: Any) -> list[dict[str, Any]]:
    """GET the key's messages until `done(messages)` holds or the deadline passes."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        messages = await stored(http, key)
        if done(messages) or time.monotonic() > deadline:
            return messages
        await asyncio.sleep(0.02)


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """user/assistant alternate, each reply directly after its own user message."""
    assert [m["role"] for m in messages] == ["user", "assistant"] * (len(messages) // 2)
    assert len(messages) % 2 == 0
    for question, answer in zip(messages[::2], messages[1::2], strict=True):
        assert answer["content"] == f"reply to: {question['content']}"
        assert answer["status"] == "complete"
        assert answer["metadata"]["turn_id"] == question["metadata"]["turn_id"]


# -- serialisation ----------------------------------------------------------------------


async def test_same_key_waits_across_transports_other_keys_do_not(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "serial:k"
    held = f"hold s1 websocket first on {key}"
    async with socket(gw) as ws:
        await ws.send(json.dumps({"content": held, "session_id": key}))
        first = await recv_json(ws)
        assert first["type"] == "message" and first["content"] == "reply"
        assert await reply_started(model, "s1")

        follow = f"http second on {key}"
        http_turn = asyncio.create_task(
            http.post(f"/v1/sessions/{key}/messages", json={"content": follow, "stream": False})
        )
        try:
            # Another key is not held up by K.
            other = await http.post(
                "/v1/sessions/serial:other/messages",
                json={"content": "independent", "stream": False},
            )
            assert other.status_code == 200 and other.json()["reply"] == "reply to: independent"

            await asyncio.sleep(0.3)
            assert not http_turn.done(), "the HTTP turn ran while the WebSocket turn held K"
            assert model.events_for(follow) == []  # its model call has not even begun
        finally:
            model.release("s1")

        frames = [first]
        while frames[-1]["type"] != "complete":
            frames.append(await recv_json(ws))
        assert "".join(f["content"] for f in frames if f["type"] == "message") == (
            f"reply to: {held}"
        )
        assert frames[-1]["message_count"] == 2

        response = await asyncio.wait_for(http_turn, TIMEOUT)
        assert response.status_code == 200, response.text
        assert response.json()["reply"] == f"reply to: {follow}"
        assert response.json()["message_count"] == 4

    order = [entry for entry in model.log if entry[1] in (held, follow)]
    assert order == [("begin", held), ("end", held), ("begin", follow), ("end", follow)]
    messages = await stored(http, key)
    assert [m["content"] for m in messages[::2]] == [held, follow]
    assert_paired(messages)


async def test_queued_turns_on_one_key_run_in_arrival_order(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "serial:fifo"
    held = "hold s2 block the queue"
    async with socket(gw, "/api/claude/ws") as ws:
        await ws.send(json.dumps({"content": held, "session_id": key}))
        assert (await recv_json(ws))["type"] == "message"
        assert await reply_started(model, "s2")
        tasks = []
        try:
            for index in range(3):
                tasks.append(
                    asyncio.create_task(
                        http.post(
                            f"/v1/sessions/{key}/messages",
                            json={"content": f"queued {index}", "stream": False},
                        )
                    )
                )
                await asyncio.sleep(0.1)  # arrive one after another
            assert not any(t.done() for t in tasks)
        finally:
            model.release("s2")
        responses = await asyncio.wait_for(asyncio.gather(*tasks), TIMEOUT)
        assert [r.json()["message_count"] for r in responses] == [4, 6, 8]
        while (await recv_json(ws))["type"] != "complete":
            pass
    messages = await stored(http, key)
    assert [m["content"] for m in messages[::2]] == [held, "queued 0", "queued 1", "queued 2"]
    assert_paired(messages)


# -- clients that leave ------------------------------------------------------------------


async def test_http_stream_closed_mid_reply_loses_nothing(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "leave:sse"
    held = "hold d1 streamed then abandoned"
    try:
        async with http.stream(
            "POST", f"/v1/sessions/{key}/messages", json={"content": held}
        ) as response:
            assert response.status_code == 200
            lines = response.aiter_lines()
            seen = []
            async with asyncio.timeout(TIMEOUT):
                async for line in lines:
                    seen.append(line)
                    if line == "event: token":
                        break
            assert seen[0] == "event: start"
        # The client is gone; the reply is still held after its first token.
        assert await reply_started(model, "d1")
        messages = await stored(http, key)
        assert [m["role"] for m in messages] == ["user"]
    finally:
        model.release("d1")
    messages = await poll_stored(http, key, lambda ms: len(ms) == 2)
    assert messages[1]["content"] == f"reply to: {held}"
    assert messages[1]["status"] == "complete"
    assert_paired(messages)


async def test_websocket_closed_mid_reply_loses_nothing(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "leave:ws"
    held = "hold d2 socket then gone"
    try:
        async with socket(gw, "/api/codex/ws") as ws:
            await ws.send(json.dumps({"content": held, "session_id": key}))
            assert (await recv_json(ws))["type"] == "message"
            assert await reply_started(model, "d2")
        assert [m["role"] for m in await stored(http, key)] == ["user"]
    finally:
        model.release("d2")
    messages = await poll_stored(http, key, lambda ms: len(ms) == 2)
    assert messages[1]["content"] == f"reply to: {held}"
    assert messages[1]["status"] == "complete"

    # The key is free again, from any transport.
    async with socket(gw, "/api/codex/ws") as ws:
        await ws.send(json.dumps({"content": "after leaving", "session_id": key}))
        frames = [await recv_json(ws)]
        while frames[-1]["type"] not in ("complete", "error"):
            frames.append(await recv_json(ws))
        assert frames[-1]["type"] == "complete" and frames[-1]["message_count"] == 4
    assert_paired(await stored(http, key))


async def test_client_that_gives_up_while_queued_still_gets_its_turn_stored(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "leave:queued"
    held = "hold d3 keep the key busy"
    async with socket(gw) as ws:
        await ws.send(json.dumps({"content": held, "session_id": key}))
        assert (await recv_json(ws))["type"] == "message"
        assert await reply_started(model, "d3")
        try:
            with pytest.raises(httpx.ReadTimeout):
                await http.post(
                    f"/v1/sessions/{key}/messages",
                    json={"content": "impatient", "stream": False},
                    timeout=0.3,
                )
        finally:
            model.release("d3")
        while (await recv_json(ws))["type"] != "complete":
            pass
    messages = await poll_stored(http, key, lambda ms: len(ms) == 4)
    assert [m["content"] for m in messages[::2]] == [held, "impatient"]
    assert_paired(messages)
