"""Exactly-once turns (issue 12, DESIGN.md §11): `Idempotency-Key` / `client_message_id`.

Transport tests run a real gateway on loopback; the store and cross-engine tests run on
SQLite and PostgreSQL.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import AsyncIterator, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from sessiongate.api.turns import begin_turn
from sessiongate.core.clock import ManualClock
from sessiongate.core.users import Caller
from sessiongate.errors import SessionGateError
from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, TextDelta, Usage
from sessiongate.models.base import WireMessage as Wire
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.idempotency import IdempotencyService, idempotent_request
from sessiongate.service.turn.pipeline import InboundTurn
from tests.conftest import BACKENDS, START, make_settings
from tests.support.gateway import Gateway, gateway_settings, parse_sse, running_gateway
from tests.support.helpers import ScriptedModel


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "database_url" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


class CountingModel:
    """Replies `reply to: <last>`, counts its calls; `gate` (a threading.Event, the
    gateway runs in another thread) holds the reply after its first word."""

    def __init__(self, name: str = "scripted") -> None:
        self.name = name
        self.calls = 0
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()

    async def stream(
        self, messages: Sequence[Wire], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.calls += 1
        words = f"reply to: {messages[-1]['content']}".split(" ")
        yield TextDelta(words[0])
        self.started.set()
        await asyncio.to_thread(self.gate.wait, 10)
        for word in words[1:]:
            yield TextDelta(" " + word)
        yield Usage(prompt_tokens=len(messages), completion_tokens=len(words))


@pytest.fixture(scope="module")
def model() -> CountingModel:
    return CountingModel()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: CountingModel) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("idem")
    with running_gateway(gateway_settings(path), {"scripted": model}) as gateway:
        yield gateway


@pytest.fixture
def client(gw: Gateway) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=gw.url, timeout=20) as c:
        yield c


def post(
    client: httpx.Client,
    gw: Gateway,
    key: str | None,
    content: str,
    *,
    user: str = "alice",
    path: str = "/v1/sessions/idem:a/messages",
    stream: bool = False,
) -> httpx.Response:
    headers = gw.auth(user)
    if key is not None:
        headers["Idempotency-Key"] = key
    return client.post(path, json={"content": content, "stream": stream}, headers=headers)


IDS = ("session_key", "session_id", "turn_id", "message_id", "reply", "status", "usage")


def test_a_retry_after_the_turn_returns_the_same_turn(
    gw: Gateway, client: httpx.Client, model: CountingModel
) -> None:
    before = model.calls
    first = post(client, gw, "k-after-1", "hello there")
    assert first.status_code == 200
    again = post(client, gw, "k-after-1", "hello there")
    assert again.status_code == 200
    assert {k: again.json()[k] for k in IDS} == {k: first.json()[k] for k in IDS}
    assert first.json()["reply"] == "reply to: hello there"
    assert model.calls == before + 1
    # Streamed retry of the same turn: start, one token with the whole reply, end.
    events = parse_sse(post(client, gw, "k-after-1", "hello there", stream=True).text)
    assert [name for name, _ in events] == ["start", "token", "end"]
    assert events[0][1]["turn_id"] == first.json()["turn_id"]
    assert events[1][1]["content"] == "reply to: hello there"
    assert events[2][1]["message_id"] == first.json()["message_id"]
    assert model.calls == before + 1
    # Stored once: one user message and one reply.
    session = first.json()["session_id"]
    listed = client.get(
        f"/v1/sessions/idem:a/segments/{session}/messages", headers=gw.auth("alice")
    ).json()["messages"]
    assert sum(m["content"] == "hello there" for m in listed) == 1


def test_client_message_id_in_the_body_and_chat_route(
    gw: Gateway, client: httpx.Client, model: CountingModel
) -> None:
    before = model.calls
    body = {"content": "routed", "stream": False, "client_message_id": "cm-1"}
    first = client.post("/v1/chat", json=body, headers=gw.auth("bob"))
    again = client.post("/v1/chat", json=body, headers=gw.auth("bob"))
    assert first.status_code == again.status_code == 200
    assert again.json()["turn_id"] == first.json()["turn_id"]
    assert model.calls == before + 1


def test_a_retry_while_the_turn_runs_joins_it(
    gw: Gateway, client: httpx.Client, model: CountingModel
) -> None:
    before = model.calls
    model.gate.clear()
    model.started.clear()
    try:
        with ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, client, gw, "k-join", "slow one", stream=True)
            assert model.started.wait(10)
            second = pool.submit(post, client, gw, "k-join", "slow one", stream=True)
            # The retry is waiting on the running turn, not running its own.
            with pytest.raises(TimeoutError):
                second.result(timeout=0.3)
            model.gate.set()
            one, two = first.result(timeout=20), second.result(timeout=20)
    finally:
        model.gate.set()
    events_one, events_two = parse_sse(one.text), parse_sse(two.text)
    assert events_one == events_two  # joined: the same events, token by token
    assert events_one[-1][0] == "end"
    assert model.calls == before + 1


def test_the_same_key_with_another_body_is_refused(gw: Gateway, client: httpx.Client) -> None:
    assert post(client, gw, "k-reuse", "one").status_code == 200
    refused = post(client, gw, "k-reuse", "two")
    assert refused.status_code == 422
    assert refused.json()["error"]["code"] == "idempotency_key_reused"
    # Another key name in the path is another request too.
    other = post(client, gw, "k-reuse", "one", path="/v1/sessions/idem:b/messages")
    assert other.json()["error"]["code"] == "idempotency_key_reused"


def test_another_user_with_the_same_key_runs_its_own_turn(
    gw: Gateway, client: httpx.Client, model: CountingModel
) -> None:
    before = model.calls
    alice = post(client, gw, "k-shared", "mine", user="alice")
    bob = post(client, gw, "k-shared", "mine", user="bob")
    assert alice.status_code == bob.status_code == 200
    assert alice.json()["turn_id"] != bob.json()["turn_id"]
    assert model.calls == before + 2
    # And a different body from bob is no conflict with alice's row.
    assert post(client, gw, "k-shared2", "x", user="alice").status_code == 200
    assert post(client, gw, "k-shared2", "y", user="bob").status_code == 200


@pytest.mark.parametrize("bad", ["", "a" * 201, "has space", "semi;colon", "é"])
def test_bad_keys_are_400(gw: Gateway, client: httpx.Client, bad: str) -> None:
    body = {"content": "x", "stream": False, "client_message_id": bad}
    answer = client.post("/v1/sessions/idem:bad/messages", json=body, headers=gw.auth("alice"))
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_idempotency_key"


def test_bad_header_key_is_400(gw: Gateway, client: httpx.Client) -> None:
    answer = post(client, gw, "bad key!", "x")
    assert answer.status_code == 400
    assert answer.json()["error"]["code"] == "invalid_idempotency_key"


def test_openai_completions_replay(gw: Gateway, client: httpx.Client, model: CountingModel) -> None:
    before = model.calls
    body = {"model": "main", "messages": [{"role": "user", "content": "open ai hi"}]}
    headers = {**gw.auth("alice"), "Idempotency-Key": "oa-1", "X-Session-Key": "oa:idem"}
    first = client.post("/v1/chat/completions", json=body, headers=headers)
    again = client.post("/v1/chat/completions", json=body, headers=headers)
    assert first.status_code == again.status_code == 200
    assert again.json()["id"] == first.json()["id"]
    assert again.json()["choices"][0]["message"]["content"] == "reply to: open ai hi"
    assert again.headers["X-Session-Id"] == first.headers["X-Session-Id"]
    assert model.calls == before + 1
    changed = {**body, "messages": [{"role": "user", "content": "other"}]}
    assert client.post("/v1/chat/completions", json=changed, headers=headers).status_code == 422


async def test_websocket_frame_with_client_message_id(gw: Gateway, model: CountingModel) -> None:
    before = model.calls

    async def one_turn(ws: Any) -> list[dict[str, Any]]:
        await ws.send(json.dumps({"content": "ws hi", "client_message_id": "ws-1"}))
        frames = []
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 10))
            if frame.get("type") == "user_message":
                continue
            frames.append(frame)
            if frame["type"] in ("complete", "error"):
                return frames

    async with connect(gw.ws_url + "/v1/ws", proxy=None) as ws:
        await ws.send(gw.keys["alice"])
        assert await ws.recv() == "authenticated"
        assert json.loads(await ws.recv())["type"] == "ready"
        first = await one_turn(ws)
        again = await one_turn(ws)
    text = "".join(f["content"] for f in first if f["type"] == "message")
    assert text == "reply to: ws hi"
    assert "".join(f["content"] for f in again if f["type"] == "message") == text
    assert first[-1]["type"] == again[-1]["type"] == "complete"
    assert model.calls == before + 1


def test_a_restarted_gateway_still_replays(tmp_path: Path) -> None:
    settings = gateway_settings(tmp_path)
    model = CountingModel()
    with (
        running_gateway(settings, {"scripted": model}) as gateway,
        httpx.Client(base_url=gateway.url, timeout=10) as c,
    ):
        first = post(c, gateway, "k-restart", "survive").json()
    assert model.calls == 1

    async def after_restart() -> dict[str, Any]:
        engine = build_engine(settings, models={"scripted": model})
        try:
            await engine.start()
            inbound = InboundTurn("idem:a", Caller("alice"), "survive")
            fields: dict[str, Any] = {"content": "survive", "agent": None, "recall": None}
            fields |= {"attachments": None, "speak": False}
            request = idempotent_request("alice", "k-restart", None, "messages:idem:a", fields)
            _, start, rest = await begin_turn(engine, inbound, request)
            return {"start": start, "rest": [event async for event in rest]}
        finally:
            await engine.aclose()

    replayed = asyncio.run(after_restart())
    assert replayed["start"].turn_id == first["turn_id"]
    assert replayed["rest"][-1].message_id == first["message_id"]
    assert model.calls == 1


# -- the store and the service, on SQLite and PostgreSQL ------------------------------


@pytest.fixture
async def engines(
    tmp_path: Path, database_url: str
) -> AsyncIterator[tuple[Engine, Engine, ScriptedModel]]:
    """Two engines on one database: two processes' worth of gateway."""
    gate = asyncio.Event()
    started = asyncio.Event()
    model = ScriptedModel(gate=gate, started=started)
    gate.set()
    settings = make_settings(tmp_path, database_url=database_url)
    one = build_engine(settings, clock=ManualClock(START), models={"scripted": model})
    await one.start()
    two = build_engine(settings, clock=ManualClock(START), models={"scripted": model})
    await two.start()
    yield one, two, model
    await one.aclose()
    await two.aclose()


def service(engine: Engine) -> IdempotencyService:
    assert engine.idempotency is not None
    return engine.idempotency


async def test_store_claim_finish_release_prune(
    engines: tuple[Engine, Engine, ScriptedModel],
) -> None:
    rows = service(engines[0]).rows
    stale = START - timedelta(minutes=10)
    assert await rows.claim("alice", "k", "f1", START, stale) is None
    held = await rows.claim("alice", "k", "f1", START, stale)
    assert held is not None and (held.status, held.fingerprint) == ("running", "f1")
    assert await rows.claim("bob", "k", "f2", START, stale) is None  # per owner
    await rows.finish("alice", "k", {"reply": "hi", "n": [1, 2]})
    done = await rows.get("alice", "k")
    assert done is not None and done.status == "done"
    assert done.result == {"reply": "hi", "n": [1, 2]}
    assert done.created_at == START
    await rows.release("alice", "k")  # only a running claim is released
    assert await rows.get("alice", "k") is not None
    await rows.release("bob", "k")
    assert await rows.get("bob", "k") is None
    # A running row past the wait limit (its process died) is taken over.
    assert await rows.claim("carol", "k", "f", START - timedelta(hours=1), stale) is None
    assert await rows.claim("carol", "k", "f", START, stale) is None
    assert await rows.prune(START + timedelta(seconds=1)) == 2
    assert await rows.get("alice", "k") is None


async def test_a_retry_in_another_engine_waits_for_the_result(
    engines: tuple[Engine, Engine, ScriptedModel],
) -> None:
    one, two, model = engines
    service(two).poll_seconds = 0.02
    gate, started = model.gate, model.started
    assert gate is not None and started is not None
    gate.clear()
    inbound = InboundTurn("chat:alice", Caller("alice"), "across")
    request = idempotent_request("alice", "x-1", None, "test", {"content": "across"})

    async def run(engine: Engine) -> list[Any]:
        _, first, rest = await begin_turn(engine, inbound, request)
        return [first, *[event async for event in rest]]

    first = asyncio.create_task(run(one))
    await asyncio.wait_for(started.wait(), 5)
    second = asyncio.create_task(run(two))
    await asyncio.sleep(0.1)
    assert not second.done()  # waiting on the running row
    gate.set()
    events_one = await asyncio.wait_for(first, 5)
    events_two = await asyncio.wait_for(second, 5)
    assert len(model.requests) == 1
    assert events_two[0].turn_id == events_one[0].turn_id
    assert events_two[-1].message_id == events_one[-1].message_id
    reply = "".join(e.content for e in events_one if e.type == "token")
    assert [e.type for e in events_two] == ["start", "token", "end"]
    assert events_two[1].content == reply


async def test_a_turn_refused_before_start_releases_the_key(
    engines: tuple[Engine, Engine, ScriptedModel],
) -> None:
    one, _, model = engines
    request = idempotent_request("alice", "x-2", None, "test", {"content": ""})
    with pytest.raises(SessionGateError):
        await begin_turn(one, InboundTurn("chat:alice", Caller("alice"), ""), request)
    await asyncio.sleep(0.05)
    assert await service(one).rows.get("alice", "x-2") is None
    assert not model.requests


async def test_a_retry_waits_a_bounded_time_then_409(
    engines: tuple[Engine, Engine, ScriptedModel],
) -> None:
    one, two, model = engines
    service(two).poll_seconds = 0.02
    service(two).wait_limit = timedelta(seconds=0.2)
    gate, started = model.gate, model.started
    assert gate is not None and started is not None
    gate.clear()
    inbound = InboundTurn("chat:alice", Caller("alice"), "long one")
    request = idempotent_request("alice", "x-3", None, "test", {"content": "long one"})
    _, _, rest = await begin_turn(one, inbound, request)
    await asyncio.wait_for(started.wait(), 5)
    with pytest.raises(SessionGateError) as busy:
        await begin_turn(two, inbound, request)
    assert (busy.value.code, busy.value.status) == ("idempotency_key_in_progress", 409)
    gate.set()
    assert [event async for event in rest][-1].type == "end"
    assert len(model.requests) == 1
