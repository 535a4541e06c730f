"""WebSocket chat (`/v1/ws`, seed 001's `/api/claude/ws` and `/api/codex/ws`) against a
real gateway on loopback, with the `websockets` asyncio client."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from sessiongate.errors import ModelError
from sessiongate.models.base import ReplyModel
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel

PATHS = ["/v1/ws", "/api/claude/ws", "/api/codex/ws"]
TIMEOUT = 5.0


@pytest.fixture(scope="module")
def scripted() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, scripted: ScriptedModel) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("ws")
    models: dict[str, ReplyModel] = {
        "scripted": scripted,
        "failing": ScriptedModel("failing", fail=ModelError("upstream down")),
        "failing_mid": ScriptedModel(
            "failing_mid", fail=ModelError("upstream broke"), fail_after_tokens=2
        ),
    }
    # `models` lets a key's override pick the failing ones (core/agent_access.py).
    agents = {"defaults": {"model": "scripted", "models": ["failing", "failing_mid"]}}
    with running_gateway(gateway_settings(path, agents=agents), models) as gateway:
        yield gateway


# -- helpers ----------------------------------------------------------------------------


def open_socket(gw: Gateway, path: str, query: str = "") -> Any:
    return connect(gw.ws_url + path + query, open_timeout=TIMEOUT, close_timeout=2, proxy=None)


async def recv_text(ws: ClientConnection) -> str:
    raw = await asyncio.wait_for(ws.recv(), TIMEOUT)
    assert isinstance(raw, str), f"expected a text frame, got {raw!r}"
    return raw


async def recv_json(ws: ClientConnection) -> dict[str, Any]:
    frame = json.loads(await recv_text(ws))
    assert isinstance(frame, dict)
    return frame


@asynccontextmanager
async def chat(
    gw: Gateway, path: str = "/v1/ws", user: str = "alice", query: str = ""
) -> AsyncIterator[tuple[ClientConnection, dict[str, Any]]]:
    """An authenticated socket and its `ready` frame."""
    async with open_socket(gw, path, query) as ws:
        await ws.send(gw.keys[user])
        assert await recv_text(ws) == "authenticated"
        ready = await recv_json(ws)
        assert ready["type"] == "ready"
        yield ws, ready


async def turn(ws: ClientConnection, content: str, **fields: Any) -> list[dict[str, Any]]:
    """Send one message frame; every frame up to and including `complete` (or `error`)."""
    await ws.send(json.dumps({"content": content, **fields}))
    frames = []
    while True:
        frame = await recv_json(ws)
        frames.append(frame)
        if frame["type"] in ("complete", "error"):
            return frames


def reply_of(frames: list[dict[str, Any]]) -> str:
    assert frames[-1]["type"] == "complete", frames
    return "".join(f["content"] for f in frames if f["type"] == "message")


async def get_json(gw: Gateway, user: str, path: str) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as client:
        response = await client.get(path, headers=gw.auth(user))
        return response.status_code, response.json()


async def messages_of(gw: Gateway, user: str, key: str) -> list[dict[str, Any]]:
    status, shown = await get_json(gw, user, f"/v1/sessions/{key}")
    assert status == 200, shown
    sid = shown["latest"]["session_id"]
    status, page = await get_json(
        gw, user, f"/v1/sessions/{key}/segments/{sid}/messages?limit=1000"
    )
    assert status == 200, page
    return list(page["messages"])


def is_iso(value: str) -> bool:
    datetime.fromisoformat(value)
    return True


# -- authentication ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected_key"),
    [
        ("/v1/ws", "agent:main:main"),
        ("/api/claude/ws", "mobile:claude:prime"),
        ("/api/codex/ws", "mobile:codex:prime"),
    ],
)
async def test_auth_then_ready_frame(gw: Gateway, path: str, expected_key: str) -> None:
    async with chat(gw, path, user="prime") as (_, ready):
        assert ready["session_id"] == expected_key
        assert ready["history"] == []
        assert ready["latest_session_id"] is None
        assert isinstance(ready["content"], str) and "connected" in ready["content"]
        assert is_iso(ready["timestamp"])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("first", ["sg_AAAAAAAAAAAA_" + "x" * 43, "not a key", "   ", b"\x00key"])
async def test_wrong_key_gets_error_then_close(gw: Gateway, path: str, first: str | bytes) -> None:
    async with open_socket(gw, path) as ws:
        await ws.send(first)
        assert await recv_text(ws) == "error:invalid_api_key"
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


async def test_a_key_erased_while_its_socket_is_open_stops_working(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is checked again before a frame is taken (here on every frame): once an
    admin erases the user, the open socket answers `invalid_api_key` and closes; another
    user's socket goes on."""
    monkeypatch.setattr("sessiongate.api.ws.socket.RECHECK_KEY_SECONDS", 0.0)
    with running_gateway(gateway_settings(tmp_path), {"scripted": ScriptedModel()}) as gw:
        async with chat(gw, user="bob") as (bob, _), chat(gw, user="alice") as (alice, _):
            assert reply_of(await turn(bob, "before"))
            async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as http:
                erased = await http.delete("/v1/users/bob", headers=gw.auth("root"))
            assert erased.status_code == 200, erased.text
            await bob.send(json.dumps({"content": "after"}))
            refused = await recv_json(bob)
            assert refused["type"] == "error" and refused["code"] == "invalid_api_key"
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(bob.recv(), TIMEOUT)
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008
            assert reply_of(await turn(alice, "still here"))


@pytest.mark.parametrize("path", PATHS)
async def test_silence_closes_after_the_auth_timeout(gw: Gateway, path: str) -> None:
    async with open_socket(gw, path) as ws:
        started = time.monotonic()
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), 4)
        elapsed = time.monotonic() - started
        assert 0.5 <= elapsed <= 3.0, elapsed  # ws_auth_timeout is 1 s in tests
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


# -- turns ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
async def test_turn_streams_message_chunks_then_complete(gw: Gateway, path: str) -> None:
    key = f"ws:turn{path.replace('/', '.')}"
    async with chat(gw, path) as (ws, _):
        frames = await turn(ws, "one two three", session_id=key, device_id="phone-1")
        chunks = [f for f in frames if f["type"] == "message"]
        assert [f["type"] for f in frames] == ["message"] * len(chunks) + ["complete"]
        assert len(chunks) >= 2
        assert all(isinstance(c["content"], str) and is_iso(c["timestamp"]) for c in chunks)
        assert reply_of(frames) == "reply to: one two three"
        complete = frames[-1]
        assert complete["message_count"] == 2
        assert complete["session_id"] == key
        assert isinstance(complete["message_id"], str) and complete["message_id"]
        assert complete["usage"]["total_tokens"] > 0
        assert is_iso(complete["timestamp"])

        again = await turn(ws, "four", session_id=key)
        assert reply_of(again) == "reply to: four"
        assert again[-1]["message_count"] == 4

    stored = await messages_of(gw, "alice", key)
    assert [(m["role"], m["content"]) for m in stored] == [
        ("user", "one two three"),
        ("assistant", "reply to: one two three"),
        ("user", "four"),
        ("assistant", "reply to: four"),
    ]
    assert stored[0]["metadata"]["device_id"] == "phone-1"
    assert stored[1]["message_id"] == complete["message_id"]


BAD_FRAMES: list[tuple[str, str | bytes, str]] = [
    ("invalid json", "{not json", "invalid_json"),
    ("json array", '["content", "x"]', "invalid_frame"),
    ("json string", '"hello"', "invalid_frame"),
    ("json number", "42", "invalid_frame"),
    ("missing content", "{}", "invalid_content"),
    ("empty content", '{"content": ""}', "invalid_content"),
    ("blank content", '{"content": "   "}', "invalid_content"),
    ("numeric content", '{"content": 5}', "invalid_content"),
    ("null content", '{"content": null}', "invalid_content"),
    ("lone surrogate", '{"content": "\\ud800"}', "invalid_content"),
    ("too long", json.dumps({"content": "x" * 20001}), "content_too_large"),
    ("numeric session_id", '{"content": "x", "session_id": 5}', "invalid_frame"),
    ("zero session_id", '{"content": "x", "session_id": 0}', "invalid_frame"),
    ("false session_id", '{"content": "x", "session_id": false}', "invalid_frame"),
    ("list session_id", '{"content": "x", "session_id": []}', "invalid_frame"),
    ("bad key", '{"content": "x", "session_id": "bad key"}', "invalid_session_key"),
    ("long key", json.dumps({"content": "x", "session_id": "k" * 201}), "invalid_session_key"),
    ("numeric device_id", '{"content": "x", "device_id": 7}', "invalid_frame"),
    ("binary frame", b'{"content": "x"}', "invalid_frame"),
]


@pytest.mark.parametrize(
    ("index", "frame", "code"),
    [(i, f, c) for i, (_, f, c) in enumerate(BAD_FRAMES)],
    ids=[n for n, _, _ in BAD_FRAMES],
)
async def test_bad_frame_gets_error_and_connection_stays_open(
    gw: Gateway, index: int, frame: str | bytes, code: str
) -> None:
    # The socket's default key is fresh: a bad frame that wrote anything would show in the
    # message count of the valid turn that follows.
    key = f"ws:bad.{index}"
    async with chat(gw, "/v1/ws", query=f"?session_id={key}") as (ws, ready):
        assert ready["session_id"] == key
        await ws.send(frame)
        error = await recv_json(ws)
        assert error["type"] == "error", error
        assert error["code"] == code
        assert isinstance(error["content"], str) and error["content"]
        assert is_iso(error["timestamp"])

        frames = await turn(ws, "still here")
        assert reply_of(frames) == "reply to: still here"
        assert frames[-1]["session_id"] == key
        assert frames[-1]["message_count"] == 2


async def test_null_session_id_and_device_id_mean_absent(gw: Gateway) -> None:
    key = "ws:null-fields"
    async with chat(gw, "/v1/ws", query=f"?session_id={key}") as (ws, _):
        frames = await turn(ws, "nulls", session_id=None, device_id=None)
        assert reply_of(frames) == "reply to: nulls"
        assert frames[-1]["session_id"] == key


async def test_several_bad_frames_in_a_row_then_a_turn(gw: Gateway) -> None:
    async with chat(gw, "/api/codex/ws") as (ws, _):
        for frame in ("nope", "[]", b"\x01\x02"):
            await ws.send(frame)
            assert (await recv_json(ws))["type"] == "error"
        # Empty content on a seed 001 endpoint is skipped without a word, as its server
        # did: the next frame this socket gets is the turn's.
        await ws.send('{"content": ""}')
        frames = await turn(ws, "fine", session_id="ws:many-bad")
        assert "error" not in [f["type"] for f in frames]
        assert reply_of(frames) == "reply to: fine"


async def test_frames_sent_back_to_back_run_one_after_another(gw: Gateway) -> None:
    key = "ws:pipelined"
    async with chat(gw, "/api/claude/ws") as (ws, _):
        for content in ("first one", "second one", "third one"):
            await ws.send(json.dumps({"content": content, "session_id": key}))
        replies: list[str] = []
        counts: list[int] = []
        chunks: list[str] = []
        while len(counts) < 3:
            frame = await recv_json(ws)
            assert frame["type"] in ("message", "complete"), frame
            if frame["type"] == "message":
                chunks.append(frame["content"])
            else:
                replies.append("".join(chunks))
                counts.append(frame["message_count"])
                chunks = []
    assert replies == ["reply to: first one", "reply to: second one", "reply to: third one"]
    assert counts == [2, 4, 6]


async def patch(gw: Gateway, key: str, body: dict[str, Any]) -> None:
    async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as client:
        response = await client.patch(f"/v1/sessions/{key}", json=body, headers=gw.auth("alice"))
        assert response.status_code == 200, response.text


async def test_model_failure_is_an_error_frame_and_the_socket_survives(gw: Gateway) -> None:
    key = "ws:model-fails"
    async with chat(gw, "/v1/ws", query=f"?session_id={key}") as (ws, _):
        assert reply_of(await turn(ws, "works")) == "reply to: works"
        await patch(gw, key, {"reply_model": "failing"})
        frames = await turn(ws, "breaks")
        assert [f["type"] for f in frames] == ["error"]
        assert frames[0]["code"] == "model_error" and "upstream down" in frames[0]["content"]

        await patch(gw, key, {"reply_model": "failing_mid"})
        frames = await turn(ws, "breaks halfway through here")
        assert [f["type"] for f in frames][-1] == "error"
        assert [f["type"] for f in frames][:-1] == ["message", "message"]
        partial = "".join(f["content"] for f in frames[:-1])

        await patch(gw, key, {"reply_model": None})
        frames = await turn(ws, "works again")
        assert reply_of(frames) == "reply to: works again"
    stored = await messages_of(gw, "alice", key)
    # The user messages of failed turns are kept; a reply that failed before its first
    # token appends nothing, one that failed midway keeps what was sent, `interrupted`.
    assert [(m["role"], m["content"], m["status"]) for m in stored] == [
        ("user", "works", "complete"),
        ("assistant", "reply to: works", "complete"),
        ("user", "breaks", "complete"),
        ("user", "breaks halfway through here", "complete"),
        ("assistant", partial, "interrupted"),
        ("user", "works again", "complete"),
        ("assistant", "reply to: works again", "complete"),
    ]


# -- history and ownership ----------------------------------------------------------------


@pytest.mark.parametrize("path", PATHS)
async def test_reconnect_with_session_id_restores_history(gw: Gateway, path: str) -> None:
    key = f"ws:resume{path.replace('/', '.')}"
    async with chat(gw, path) as (ws, _):
        assert reply_of(await turn(ws, "the otter is 7781", session_id=key))
        assert reply_of(await turn(ws, "and the heron", session_id=key))

    async with chat(gw, path, query=f"?session_id={key}") as (ws, ready):
        assert ready["session_id"] == key
        assert [(m["role"], m["content"], m["status"]) for m in ready["history"]] == [
            ("user", "the otter is 7781", "complete"),
            ("assistant", "reply to: the otter is 7781", "complete"),
            ("user", "and the heron", "complete"),
            ("assistant", "reply to: and the heron", "complete"),
        ]
        assert all(is_iso(m["timestamp"]) for m in ready["history"])
        status, shown = await get_json(gw, "alice", f"/v1/sessions/{key}")
        assert status == 200 and ready["latest_session_id"] == shown["latest"]["session_id"]
        # A frame without session_id goes to the socket's key.
        frames = await turn(ws, "third")
        assert frames[-1]["session_id"] == key and frames[-1]["message_count"] == 6


async def test_default_key_history_restored_on_plain_reconnect(gw: Gateway) -> None:
    async with chat(gw, "/v1/ws", user="bob") as (ws, ready):
        assert ready["session_id"] == "chat:bob"
        before = len(ready["history"])
        assert reply_of(await turn(ws, "remember plain reconnect"))
    async with chat(gw, "/v1/ws", user="bob") as (_, ready):
        assert len(ready["history"]) == before + 2
        assert ready["history"][-2]["content"] == "remember plain reconnect"


async def test_another_users_key_name_is_the_callers_own_and_reveals_nothing(
    gw: Gateway,
) -> None:
    key = "ws:alice-private"
    async with chat(gw, "/v1/ws", user="alice") as (ws, _):
        assert reply_of(await turn(ws, "alice secret 4242", session_id=key))

    # Bob naming the same key talks in his own namespace: a fresh conversation.
    async with chat(gw, "/api/claude/ws", user="bob") as (ws, _):
        frames = await turn(ws, "hello from bob", session_id=key)
        assert reply_of(frames) == "reply to: hello from bob"
        assert "4242" not in json.dumps(frames)

    # Asking for the key in the URL restores bob's own history, never alice's.
    async with chat(gw, "/v1/ws", user="bob", query=f"?session_id={key}") as (ws, ready):
        assert "4242" not in json.dumps(ready)
        assert [m["content"] for m in ready["history"]] == [
            "hello from bob",
            "reply to: hello from bob",
        ]

    stored = await messages_of(gw, "alice", key)
    assert [m["content"] for m in stored] == ["alice secret 4242", "reply to: alice secret 4242"]


async def test_new_over_websocket_yields_rotation(gw: Gateway) -> None:
    key = "ws:rotate"
    async with chat(gw, "/api/claude/ws") as (ws, _):
        first = await turn(ws, "before the rotation", session_id=key)
        assert reply_of(first) == "reply to: before the rotation"
        status, shown = await get_json(gw, "alice", f"/v1/sessions/{key}")
        old_sid = shown["latest"]["session_id"]

        frames = await turn(ws, "/new after the rotation", session_id=key)
        rotations = [f for f in frames if f["type"] == "rotation"]
        assert len(rotations) == 1
        rotation = rotations[0]
        assert rotation["reason"] == "manual"
        assert rotation["from"] == old_sid and rotation["to"] != old_sid
        assert is_iso(rotation["timestamp"])
        assert frames.index(rotation) < min(
            i for i, f in enumerate(frames) if f["type"] == "message"
        )
        assert reply_of(frames) == "reply to: after the rotation"
        assert frames[-1]["message_count"] == 2

        bare = await turn(ws, "/new", session_id=key)
        assert [f["type"] for f in bare] == ["rotation", "complete"]
        assert bare[-1]["message_id"] is None

    status, shown = await get_json(gw, "alice", f"/v1/sessions/{key}")
    assert status == 200
    assert [r["reason"] for r in shown["rotations"]] == ["manual", "manual"]
    assert shown["latest"]["session_id"] == bare[0]["to"]


async def test_seed_endpoints_keep_separate_sessions(gw: Gateway, scripted: ScriptedModel) -> None:
    async with chat(gw, "/api/claude/ws") as (ws, claude_ready):
        assert reply_of(await turn(ws, "claude only 1111"))
    async with chat(gw, "/api/codex/ws") as (ws, codex_ready):
        assert codex_ready["session_id"] != claude_ready["session_id"]
        assert "1111" not in json.dumps(codex_ready["history"])
        assert reply_of(await turn(ws, "codex only 2222"))
    codex_request = next(r for r in reversed(scripted.requests) if "2222" in r[-1]["content"])
    assert "1111" not in json.dumps(codex_request)
    async with chat(gw, "/api/claude/ws") as (_, ready):
        history = json.dumps(ready["history"])
        assert "claude only 1111" in history and "2222" not in history
    codex_messages = await messages_of(gw, "alice", codex_ready["session_id"])
    assert "1111" not in json.dumps(codex_messages)


# -- /api/health ------------------------------------------------------------------------


async def wait_for_connections(gw: Gateway, expected: dict[str, int]) -> dict[str, Any]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        status, health = await get_json(gw, "alice", "/api/health")
        assert status == 200
        if health["connections"] == expected or time.monotonic() > deadline:
            return health
        await asyncio.sleep(0.02)


async def test_api_health_counts_open_sockets(gw: Gateway) -> None:
    zero = {"claude": 0, "codex": 0}
    assert (await wait_for_connections(gw, zero))["connections"] == zero
    async with (
        chat(gw, "/api/claude/ws") as (claude_a, _),
        chat(gw, "/api/claude/ws", user="bob") as _,
        chat(gw, "/api/codex/ws") as _,
        chat(gw, "/v1/ws") as _,
    ):
        health = await wait_for_connections(gw, {"claude": 2, "codex": 1})
        assert health["connections"] == {"claude": 2, "codex": 1}
        assert reply_of(await turn(claude_a, "count me", session_id="ws:health-claude"))
        await claude_a.close()
        health = await wait_for_connections(gw, {"claude": 1, "codex": 1})
        assert health["connections"] == {"claude": 1, "codex": 1}
        assert health["sessions"]["by_agent"]["claude"] >= 1
        assert health["sessions"]["total"] >= 1
    assert (await wait_for_connections(gw, zero))["connections"] == zero


# -- pipelining and frame limits ------------------------------------------------------------


async def test_four_hundred_frames_at_once_each_get_one_answer_and_the_socket_lives(
    gw: Gateway,
) -> None:
    """Frames are read while turns run: a ping is answered at once, every frame gets
    exactly one answer (its turn's `complete`, or `queue_full` naming it)."""
    key = "ws:flood"
    total = 400
    answered: dict[int, str] = {}
    async with chat(gw, "/v1/ws") as (ws, _):
        await asyncio.gather(
            *(ws.send(json.dumps({"content": f"n{n}", "session_id": key})) for n in range(total))
        )

        async def read_answers() -> None:
            while len(answered) < total:
                frame = await recv_json(ws)
                if frame["type"] == "message":
                    continue
                assert frame["type"] in ("complete", "error"), frame
                assert frame["frame"] not in answered, frame
                answered[frame["frame"]] = frame["code"] if frame["type"] == "error" else "ok"

        # Read while pinging: the client's own receive queue must not be what blocks.
        reader = asyncio.create_task(read_answers())
        pong = await ws.ping()
        await asyncio.wait_for(pong, TIMEOUT)  # not stuck behind 400 queued turns
        assert len(answered) < total  # the pong came while turns were still running
        await asyncio.wait_for(reader, 60)
        assert reply_of(await turn(ws, "still here?", session_id=key)) == "reply to: still here?"
    assert sorted(answered) == list(range(1, total + 1))
    ran = [n for n, outcome in answered.items() if outcome == "ok"]
    refused = [n for n, outcome in answered.items() if outcome != "ok"]
    assert set(answered.values()) <= {"ok", "queue_full"}
    assert ran and refused  # the default queue (64) cannot hold 400
    stored = await messages_of(gw, "alice", key)
    users = [m["content"] for m in stored if m["role"] == "user"]
    # The turns that ran are the frames accepted, in the order they were sent.
    assert users == [f"n{n - 1}" for n in sorted(ran)] + ["still here?"]


@pytest.mark.parametrize(
    ("frame", "code"),
    [
        (json.dumps({"content": "x" * (1_048_576 + 10)}), "frame_too_large"),
        ('{"content": "x", "extra": ' + "[" * 100 + "]" * 100 + "}", "frame_too_deep"),
        ('{"content": "x", "extra": ' + "[" * 100_000 + "]" * 100_000 + "}", "frame_too_deep"),
        ("[" * 100_000, "frame_too_deep"),
    ],
    ids=["over-1-MiB", "100-deep", "100000-deep", "unclosed-100000"],
)
async def test_oversized_and_deep_frames_get_an_error_and_the_socket_stays_open(
    gw: Gateway, frame: str, code: str
) -> None:
    async with chat(gw, "/v1/ws") as (ws, _):
        await ws.send(frame)
        error = await recv_json(ws)
        assert (error["type"], error["code"], error["frame"]) == ("error", code, 1)
        assert reply_of(await turn(ws, "after that", session_id="ws:limits"))
