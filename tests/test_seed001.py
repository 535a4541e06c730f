"""Seed 001's phone app against a real gateway on loopback (DESIGN.md §11): the public
`/api/health` and `/api/status`, the reconnect that names no key, Claude and Codex keys
kept apart, and every turn broadcast to every socket open on its key."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from websockets.exceptions import ConnectionClosed

from sessiongate.api.ws.broadcast_wire import MAX_PAYLOAD_BYTES, Assembler, encode
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    ReplyModel,
    TextDelta,
    Usage,
)
from sessiongate.models.base import WireMessage as Wire
from sessiongate.service import seed_endpoints
from tests.support.gateway import Gateway, gateway_settings
from tests.support.helpers import ScriptedModel
from tests.support.seed001 import TIMEOUT, gateway_on, phone


class SlowModel:
    """Words 0..59, one every 20 ms, for a message that says "slowly"; else an echo."""

    name = "slow"

    async def stream(
        self, messages: Sequence[Wire], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        content = str(messages[-1].get("content", ""))
        if "slowly" in content:
            for index in range(60):
                yield TextDelta(f"w{index} ")
                await asyncio.sleep(0.02)
        else:
            for index, word in enumerate(f"reply to: {content}".split(" ")):
                yield TextDelta(word if index == 0 else " " + word)
                await asyncio.sleep(0)
        yield Usage(1, 1)


@pytest.fixture
def scripted() -> ScriptedModel:
    return ScriptedModel()


@pytest.fixture
def gw(tmp_path: Path, scripted: ScriptedModel) -> Iterator[Gateway]:
    models: dict[str, ReplyModel] = {"scripted": scripted, "slow": SlowModel()}
    # `models` lets a key's override pick the slow one (core/agent_access.py).
    agents = {"defaults": {"model": "scripted", "models": ["slow"]}}
    with gateway_on(gateway_settings(tmp_path, agents=agents), models) as gateway:
        yield gateway


async def rest(
    gw: Gateway, method: str, path: str, user: str | None = "alice", **kwargs: Any
) -> httpx.Response:
    headers = gw.auth(user) if user else {}
    async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as client:
        return await client.request(method, path, headers=headers, **kwargs)


async def stored(gw: Gateway, key: str, user: str = "alice") -> list[tuple[str, str]]:
    shown = (await rest(gw, "GET", f"/v1/sessions/{key}", user)).json()
    sid = shown["latest"]["session_id"]
    page = await rest(gw, "GET", f"/v1/sessions/{key}/segments/{sid}/messages?limit=1000", user)
    return [(m["role"], m["content"]) for m in page.json()["messages"]]


def app_of(gw: Gateway, user: str = "alice", **kwargs: Any) -> Any:
    return phone(gw.ws_url, gw.keys[user], **kwargs)


# -- /api/health and /api/status ----------------------------------------------------------


async def test_health_and_status_answer_without_a_key_and_show_counts_only(gw: Gateway) -> None:
    secret_key, secret_words = "jarvis-private-7q", "the vault code is 5531"
    async with app_of(gw, session_id=secret_key) as app:
        assert (await app.turn(secret_words)).end["type"] == "complete"
        async with app_of(gw, "bob", endpoint="codex") as _:
            health = (await rest(gw, "GET", "/api/health", None)).json()
            assert health["connections"] == {"claude": 1, "codex": 1}
    for headers in ({}, gw.auth("alice"), {"Authorization": "Bearer sg_not_a_key"}):
        async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as client:
            health_response = await client.get("/api/health", headers=headers)
            status_response = await client.get("/api/status", headers=headers)
        assert health_response.status_code == status_response.status_code == 200
        health, status = health_response.json(), status_response.json()
        assert set(health) == {"status", "version", "timestamp", "connections", "sessions"}
        assert health["status"] == "ok"
        assert health["sessions"] == {"total": 1, "by_agent": {"claude": 1, "codex": 0}}
        assert set(health["connections"]) == {"claude", "codex"}
        assert set(status) == {"status", "version", "health", "timestamp", "features"}
        assert status["status"] == "running" and status["health"] == "ok"
        assert status["features"]["session_persistence"] is True
        assert all(isinstance(v, bool) for v in status["features"].values())
        text = health_response.text + status_response.text
        for private in (secret_key, "5531", "vault", *gw.keys, *gw.keys.values(), "mobile:"):
            assert private not in text


async def test_health_counts_are_current_as_soon_as_a_turn_ends(
    gw: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app reads `/api/health` right after its turn's `complete`: the counts this
    process changed are never served from the reuse (made an hour long here, so only the
    invalidation can make them current); turns on existing keys change nothing."""
    monkeypatch.setattr(seed_endpoints, "COUNTS_TTL", 3600.0)

    async def sessions() -> Any:
        return (await rest(gw, "GET", "/api/health", None)).json()["sessions"]

    assert await sessions() == {"total": 0, "by_agent": {"claude": 0, "codex": 0}}
    async with app_of(gw, session_id="jarvis-count") as app:
        assert (await app.turn("first")).end["type"] == "complete"
        assert await sessions() == {"total": 1, "by_agent": {"claude": 1, "codex": 0}}
        assert (await app.turn("again")).end["type"] == "complete"
    async with app_of(gw, endpoint="codex", session_id="codex-count") as app:
        assert (await app.turn("codex too")).end["type"] == "complete"
        assert await sessions() == {"total": 2, "by_agent": {"claude": 1, "codex": 1}}
    made = await rest(
        gw, "POST", "/v1/sessions/rest-count/messages", json={"content": "hi", "stream": False}
    )
    assert made.status_code == 200
    assert await sessions() == {"total": 3, "by_agent": {"claude": 1, "codex": 1}}
    assert (await rest(gw, "DELETE", "/v1/sessions/jarvis-count")).status_code == 204
    assert await sessions() == {"total": 2, "by_agent": {"claude": 0, "codex": 1}}
    exported = await rest(gw, "GET", "/v1/sessions/codex-count/export")
    assert (await rest(gw, "DELETE", "/v1/sessions/codex-count")).status_code == 204
    assert await sessions() == {"total": 1, "by_agent": {"claude": 0, "codex": 0}}
    imported = await rest(gw, "POST", "/v1/import", content=exported.content)
    assert imported.status_code == 201, imported.text
    assert await sessions() == {"total": 2, "by_agent": {"claude": 0, "codex": 1}}


# -- the app's flow, reconnects and a restart ------------------------------------------------


async def test_seed_app_flow_reconnect_without_parameters_and_restart(
    tmp_path: Path, scripted: ScriptedModel
) -> None:
    settings = gateway_settings(tmp_path)
    models: dict[str, ReplyModel] = {"scripted": scripted}
    with gateway_on(settings, models) as gw:
        keys, port = gw.keys, int(gw.url.rsplit(":", 1)[1])
        # First start of the app: no key of its own yet on the server.
        async with app_of(gw, session_id="mobile-jarvis-A", device_id="iphone-A") as app:
            assert app.ready["session_id"] == "mobile:claude:alice"
            assert app.ready["history"] == [] and "connected" in app.ready["content"]
            first = await app.turn("Show me capsules")
            assert first.types[-1] == "complete" and len(first.types) >= 3
            assert first.text == "reply to: Show me capsules"
            assert first.end["message_count"] == 2 and first.end["session_id"] == "mobile-jarvis-A"
            assert (await app.turn("and the second one")).end["message_count"] == 4
        # A reconnect naming nothing continues the key the app last used on this endpoint.
        async with app_of(gw, device_id="iphone-A") as app:
            assert app.ready["session_id"] == "mobile-jarvis-A"
            assert [m["content"] for m in app.ready["history"]] == [
                "Show me capsules",
                "reply to: Show me capsules",
                "and the second one",
                "reply to: and the second one",
            ]
            again = await app.turn("third, without a session_id")
            assert again.end["session_id"] == "mobile-jarvis-A"
            assert again.end["message_count"] == 6
        # Codex keeps its own.
        async with app_of(gw, endpoint="codex", session_id="mobile-codex-A") as app:
            assert app.ready["session_id"] == "mobile:codex:alice"
            assert app.ready["history"] == []
            assert (await app.turn("codex here")).end["message_count"] == 2
        # Another user starts from their own default.
        async with app_of(gw, "bob") as app:
            assert app.ready["session_id"] == "mobile:claude:bob" and app.ready["history"] == []

    # The gateway restarts on the same data: the reconnect still finds both.
    with gateway_on(settings, models, keys=keys, port=port) as gw:
        async with app_of(gw, device_id="iphone-A") as app:
            assert app.ready["session_id"] == "mobile-jarvis-A"
            assert len(app.ready["history"]) == 6
            turn = await app.turn("after the restart")
            assert turn.end["message_count"] == 8
        async with app_of(gw, endpoint="codex") as app:
            assert app.ready["session_id"] == "mobile-codex-A"
            assert [m["content"] for m in app.ready["history"]] == [
                "codex here",
                "reply to: codex here",
            ]
    # The model saw the whole conversation after the restart, and no Codex turn in it.
    request = scripted.requests[-1]
    contents = [m["content"] for m in request]
    assert contents[-1] == "after the restart" and "Show me capsules" in contents
    assert "codex here" not in json.dumps(request)


async def test_last_key_is_per_user_and_endpoint_and_goes_with_an_erasure(gw: Gateway) -> None:
    async with app_of(gw, session_id="k-one", device_id="A") as app:
        await app.turn("on k-one")
    # Other paths to other keys do not move the claude endpoint's last key.
    response = await rest(
        gw, "POST", "/v1/sessions/k-rest/messages", json={"content": "rest", "stream": False}
    )
    assert response.status_code == 200
    async with phone(gw.ws_url, gw.keys["alice"], "codex", session_id="k-codex") as app:
        await app.turn("on codex")
    async with app_of(gw, device_id="B") as app:
        assert app.ready["session_id"] == "k-one"
        await app.turn("device B moves on", session_id="k-two")
    # Per user, not per device: device A reconnects into what device B used last.
    async with app_of(gw, device_id="A") as app:
        assert app.ready["session_id"] == "k-two"
    async with app_of(gw, "bob") as app:
        assert app.ready["session_id"] == "mobile:claude:bob"
    assert (await rest(gw, "DELETE", "/v1/sessions/k-two")).status_code == 204
    async with app_of(gw, device_id="A") as app:
        assert app.ready["session_id"] == "mobile:claude:alice"  # never a key that is gone
        assert app.ready["history"] == []


# -- Claude and Codex keys stay apart ---------------------------------------------------------


async def test_a_key_created_through_one_endpoint_is_refused_by_the_other(gw: Gateway) -> None:
    async with app_of(gw, session_id="jarvis-1") as app:
        assert (await app.turn("claude made me")).end["type"] == "complete"
    async with app_of(gw, endpoint="codex", session_id="codex-1") as app:
        assert (await app.turn("codex made me")).end["type"] == "complete"

    for endpoint, foreign, owner in (
        ("codex", "jarvis-1", "claude"),
        ("claude", "codex-1", "codex"),
    ):
        async with app_of(gw, endpoint=endpoint) as app:
            refused = await app.turn("let me in", session_id=foreign)
            assert refused.types == ["error"]
            error = refused.end
            assert error["code"] == "wrong_endpoint" and error["frame"] == 1
            assert f"/api/{owner}/ws" in error["content"] and foreign in error["content"]
            # The socket stays open and works on a key of its own.
            assert (await app.turn("fine here", session_id=f"own-{endpoint}")).end[
                "type"
            ] == "complete"
    assert await stored(gw, "jarvis-1") == [
        ("user", "claude made me"),
        ("assistant", "reply to: claude made me"),
    ]


@pytest.mark.parametrize("endpoint", ["claude", "codex"])
async def test_a_frame_with_empty_content_is_skipped_as_the_seed_did(
    gw: Gateway, endpoint: str
) -> None:
    """Seed 001's server went on to the next frame when `content` was empty: no error
    frame for its app to show, no turn, nothing stored. `/v1/ws` keeps its
    `invalid_content` for the same frames (tests/test_api_websocket.py)."""
    key = f"quiet-{endpoint}"
    async with app_of(gw, endpoint=endpoint, session_id=key) as app:
        for frame in ({}, {"content": ""}, {"content": None}, {"content": "  \n "}):
            await app.ws.send(json.dumps({**frame, "session_id": key, "device_id": "iphone-1"}))
        assert await app.silent(0.5), app.seen
        answered = await app.turn("now something")
        assert answered.types[-1] == "complete", answered.frames
        assert answered.end["message_count"] == 2
        # The frame count still counts the skipped frames: this was the app's fifth.
        assert answered.end["frame"] == 5
        # Content of another kind is no empty message: still an error frame.
        await app.ws.send(json.dumps({"content": 5, "session_id": key}))
        refused = await app.until_end()
        assert refused.types == ["error"] and refused.end["code"] == "invalid_content"
    assert await stored(gw, key) == [
        ("user", "now something"),
        ("assistant", "reply to: now something"),
    ]


async def test_wrong_endpoint_in_the_url_is_an_error_frame_then_close(gw: Gateway) -> None:
    from websockets.asyncio.client import connect

    async with app_of(gw, session_id="jarvis-url") as app:
        await app.turn("claude made me")
    async with connect(
        f"{gw.ws_url}/api/codex/ws?session_id=jarvis-url", open_timeout=TIMEOUT, proxy=None
    ) as ws:
        await ws.send(gw.keys["alice"])
        assert await asyncio.wait_for(ws.recv(), TIMEOUT) == "authenticated"
        error = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert error["type"] == "error" and error["code"] == "wrong_endpoint"
        with pytest.raises(ConnectionClosed) as closed:
            await asyncio.wait_for(ws.recv(), TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1008


async def test_keys_made_elsewhere_are_open_to_both_and_v1_ws_to_every_key(gw: Gateway) -> None:
    response = await rest(
        gw, "POST", "/v1/sessions/shared-1/messages", json={"content": "rest", "stream": False}
    )
    assert response.status_code == 200
    async with app_of(gw, session_id="shared-1") as app:
        assert (await app.turn("from claude")).end["message_count"] == 4
    async with app_of(gw, endpoint="codex", session_id="shared-1") as app:
        assert (await app.turn("from codex")).end["message_count"] == 6
    async with app_of(gw, session_id="jarvis-2") as app:
        await app.turn("claude's own")
    async with phone(gw.ws_url, gw.keys["alice"], "codex", query="?session_id=shared-1") as app:
        assert app.ready["session_id"] == "shared-1" and len(app.ready["history"]) == 6
    # /v1/ws is not a seed endpoint: it continues any key of the caller's.
    from websockets.asyncio.client import connect

    async with connect(f"{gw.ws_url}/v1/ws?session_id=jarvis-2", proxy=None) as ws:
        await ws.send(gw.keys["alice"])
        assert await ws.recv() == "authenticated"
        assert json.loads(await ws.recv())["session_id"] == "jarvis-2"
        await ws.send(json.dumps({"content": "from v1"}))
        frame: dict[str, Any] = {"type": "message"}
        while frame["type"] == "message":
            frame = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert frame["type"] == "complete" and frame["message_count"] == 4
    # Another user's key of the same name is theirs: codex may create it for bob.
    async with app_of(gw, "bob", endpoint="codex", session_id="jarvis-2") as app:
        assert (await app.turn("bob's codex key")).end["message_count"] == 2


# -- broadcast ------------------------------------------------------------------------------


# `event_id` (`<turn_id>.<seq>`): where a client resumes a dropped turn (docs/api.md).
MESSAGE_FIELDS = {"type", "content", "timestamp", "event_id"}
COMPLETE_FIELDS = {
    "event_id",
    "type",
    "content",
    "message_count",
    "message_id",
    "status",
    "session_id",
    "usage",
    "timestamp",
    "frame",
}


async def test_two_devices_on_one_key_see_each_others_turns(gw: Gateway) -> None:
    async with (
        app_of(gw, session_id="shared-chat", device_id="iphone") as iphone,
        app_of(gw, query="?session_id=shared-chat", device_id="ipad") as ipad,
        phone(gw.ws_url, gw.keys["alice"], "claude", query="?session_id=elsewhere") as other,
        app_of(gw, "bob", query="?session_id=shared-chat") as bob,
    ):
        assert ipad.ready["session_id"] == "shared-chat"
        sent = await iphone.turn("hello from the phone")
        # The sender's own frames are exactly what they were without broadcasting.
        assert sent.types == ["message"] * (len(sent.types) - 1) + ["complete"]
        assert all(set(f) == MESSAGE_FIELDS for f in sent.frames[:-1])
        assert set(sent.end) == COMPLETE_FIELDS and sent.end["frame"] == 1

        seen = await ipad.until_end()
        user = seen.frames[0]
        assert user["type"] == "user_message"
        assert user["content"] == "hello from the phone"
        assert (user["session_id"], user["device_id"], user["transport"]) == (
            "shared-chat",
            "iphone",
            "claude",
        )
        turn_id = user["turn_id"]
        assert seen.types == ["user_message"] + ["message"] * (len(sent.types) - 1) + ["complete"]
        assert seen.text == sent.text == "reply to: hello from the phone"
        assert all(
            f["turn_id"] == turn_id and f["session_id"] == "shared-chat" for f in seen.frames
        )
        end = seen.end
        assert "frame" not in end
        assert {k: end[k] for k in ("message_count", "message_id", "status")} == {
            k: sent.end[k] for k in ("message_count", "message_id", "status")
        }

        # And the other way round, the ipad's frame naming no key.
        back = await ipad.turn("hello from the tablet", session_id=None)
        assert back.end["message_count"] == 4
        mirror = await iphone.until_end()
        assert mirror.frames[0]["content"] == "hello from the tablet"
        assert mirror.frames[0]["device_id"] == "ipad" and mirror.text == back.text

        # Nothing reached a socket on another key, or another user's key of the same name.
        assert await other.silent() and await bob.silent()
    assert await stored(gw, "shared-chat") == [
        ("user", "hello from the phone"),
        ("assistant", "reply to: hello from the phone"),
        ("user", "hello from the tablet"),
        ("assistant", "reply to: hello from the tablet"),
    ]


async def test_a_socket_watches_the_keys_its_frames_use(gw: Gateway) -> None:
    async with app_of(gw, device_id="A") as first, app_of(gw, device_id="B") as second:
        await first.turn("first uses its key", session_id="hopping")
        assert await second.silent()  # second has not used `hopping`
        await second.turn("now second does", session_id="hopping")
        assert (await first.until_end()).frames[0]["content"] == "now second does"
        await first.turn("and first answers", session_id="hopping")
        assert (await second.until_end()).frames[0]["content"] == "and first answers"


async def test_turns_from_rest_reach_the_sockets_on_their_key(gw: Gateway) -> None:
    async with (
        app_of(gw, query="?session_id=from-rest") as app,
        phone(gw.ws_url, gw.keys["alice"], "codex", query="?session_id=from-rest") as codex,
    ):
        response = await rest(
            gw,
            "POST",
            "/v1/sessions/from-rest/messages",
            json={"content": "typed in a terminal", "stream": False},
        )
        assert response.status_code == 200
        body = response.json()
        for socket in (app, codex):
            seen = await socket.until_end()
            assert seen.types == ["user_message", "message", "complete"]
            assert seen.frames[0]["content"] == "typed in a terminal"
            assert seen.frames[0]["transport"] is None
            assert seen.text == "reply to: typed in a terminal"
            assert seen.end["message_count"] == 2
            assert seen.end["message_id"] == body["message_id"]
            assert seen.end["session_id"] == "from-rest"


async def test_the_others_see_the_turn_end_when_its_sender_leaves_half_way(
    gw: Gateway,
) -> None:
    body = {"content": "set up", "stream": False}
    assert (await rest(gw, "POST", "/v1/sessions/leaving/messages", json=body)).status_code == 200
    patched = await rest(gw, "PATCH", "/v1/sessions/leaving", json={"reply_model": "slow"})
    assert patched.status_code == 200
    async with app_of(gw, query="?session_id=leaving") as watcher:
        async with app_of(gw, session_id="leaving") as sender:
            await sender.send("answer slowly please")
            assert (await sender.frame())["type"] == "message"
        # The sender is gone; the turn runs on and the watcher sees all of it.
        seen = await watcher.until_end(wait=10)
        assert seen.types[0] == "user_message" and seen.end["type"] == "complete"
        assert seen.text.split() == [f"w{i}" for i in range(60)]
        assert seen.end["message_count"] == 4
    assert [role for role, _ in await stored(gw, "leaving")] == ["user", "assistant"] * 2


# -- the envelopes between processes ----------------------------------------------------------


@pytest.mark.parametrize("size", [10, 7000, 8000, 40_000, 200_000])
@pytest.mark.parametrize("alphabet", ["ascii", "quotes", "unicode"])
def test_envelopes_fit_notify_and_come_back_whole(size: int, alphabet: str) -> None:
    text = {
        "ascii": "abcdefghij" * (size // 10),
        "quotes": '"\\\n\t' * (size // 4),
        "unicode": "漢字🎉é" * (size // 4),
    }[alphabet]
    envelope = {"v": 1, "o": "proc", "k": "alice/key", "f": [{"type": "message", "content": text}]}
    payloads = encode(envelope, chunk_id=7)
    assert all(len(p.encode()) <= MAX_PAYLOAD_BYTES for p in payloads)
    assembler = Assembler()
    results = [
        assembler.feed(orjson.loads(p)) if len(payloads) > 1 else orjson.loads(p) for p in payloads
    ]
    assert results[:-1] == [None] * (len(payloads) - 1)
    assert results[-1] == envelope


def test_a_lost_piece_gives_up_that_payload_only() -> None:
    big = {"v": 1, "o": "p", "k": "a/k", "f": [{"content": "x" * 30_000}]}
    pieces = [orjson.loads(p) for p in encode(big, chunk_id=1)]
    assert len(pieces) >= 4
    assembler = Assembler()
    assert assembler.feed(pieces[0]) is None
    assert assembler.feed(pieces[2]) is None  # piece 1 never came
    assert [assembler.feed(p) for p in pieces[3:]] == [None] * len(pieces[3:])
    fresh = [orjson.loads(p) for p in encode(big, chunk_id=2)]
    assert [assembler.feed(p) for p in fresh][-1] == big
