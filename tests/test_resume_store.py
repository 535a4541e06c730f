"""Resuming a turn this process does not hold (issue 11): after a restart, a SIGKILL, or
on another worker sharing the PostgreSQL database, the turn is read back from the store.

Real gateways on loopback over the same data; the model holds a reply half-way until the
test releases it.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import threading
from collections.abc import AsyncGenerator, AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
from websockets.asyncio.client import connect

from sessiongate.api.turn_events import KEEPALIVE, _frames
from sessiongate.config import Settings
from sessiongate.core.events import EndEvent, ErrorEvent, StartEvent, TokenEvent, TurnEvent
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.service.engine import build_engine
from sessiongate.service.turn.recovery import NO_REPLY, StoredTurnReplay, ending_events
from sessiongate.store.postgres import turns as postgres_turns
from sessiongate.store.sqlite import turns as sqlite_turns
from sessiongate.store.turns import StoredTurn
from tests.conftest import BACKENDS
from tests.support.gateway import USERS, Gateway, gateway_settings, run_sync, running_gateway
from tests.support.held_model import HeldModel
from tests.support.kill import kill_when_ready

TIMEOUT = 15.0
HELD_AFTER = 2
UNKNOWN_TURN = "01890000-0000-7000-8000-000000000000"
CRASH_CHILD = Path(__file__).parent / "support" / "crash_child.py"

Event = tuple[str, str, dict[str, Any]]  # (id, event type, data)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Every test here that takes `database_url` runs on both stores, unless it says which.
    marked = any(m.name == "parametrize" for m in metafunc.definition.iter_markers())
    if "database_url" in metafunc.fixturenames and not marked:
        metafunc.parametrize("backend", BACKENDS, indirect=True)


def settings_for(tmp_path: Path, database_url: str) -> Settings:
    return gateway_settings(tmp_path, database={"url": database_url, "pool_size": 4})


def add_users(settings: Settings) -> dict[str, str]:
    """The test users, added through an engine of their own (a PostgreSQL store opens only
    once started, after `running_gateway` would add them); their API keys."""

    async def add() -> dict[str, str]:
        engine = build_engine(settings, models={"scripted": HeldModel(HELD_AFTER)})
        await engine.start()
        try:
            keys = {}
            for name, (primary, admin) in USERS.items():
                _, keys[name] = await engine.users.add(name, primary=primary, admin=admin)
            return keys
        finally:
            await engine.aclose()

    return run_sync(add())


def parse_events(text: str) -> list[Event]:
    events: list[Event] = []
    for block in text.strip().split("\n\n"):
        fields = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in fields:
            events.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return events


async def stream_turn(gw: Gateway, key: str, content: str) -> list[Event]:
    async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as http:
        response = await http.post(
            f"/v1/sessions/{key}/messages", json={"content": content}, headers=gw.auth("alice")
        )
    assert response.status_code == 200, response.text
    return parse_events(response.text)


async def resume(
    gw: Gateway, turn_id: str, user: str = "alice", last_event_id: str | None = None
) -> httpx.Response:
    headers = gw.auth(user)
    if last_event_id is not None:
        headers["Last-Event-ID"] = last_event_id
    async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as http:
        return await http.get(f"/v1/turns/{turn_id}/events", headers=headers)


async def wait_until(event: threading.Event) -> None:
    assert await asyncio.to_thread(event.wait, TIMEOUT), "the model was never reached"


# -- across a restart -------------------------------------------------------------------


async def test_a_finished_turn_resumes_after_a_restart(tmp_path: Path, database_url: str) -> None:
    settings = settings_for(tmp_path, database_url)
    model = HeldModel(HELD_AFTER)
    with running_gateway(settings, {"scripted": model}, keys=add_users(settings)) as first:
        original = await stream_turn(first, "resume:restart", "what survives a restart")
        keys = first.keys
    turn_id = original[0][2]["turn_id"]
    original_end = original[-1][2]
    assert original[-1][1] == "end"

    with running_gateway(settings, {"scripted": model}, keys=keys) as second:
        assert second.engine.turn_journal is not None and len(second.engine.turn_journal) == 0
        # The client had seen up to the third event: the answer still starts at `start`.
        response = await resume(second, turn_id, last_event_id=f"{turn_id}.3")
        assert response.status_code == 200, response.text
        assert response.headers["x-session-key"] == "resume:restart"
        events = parse_events(response.text)
        assert [(e[0], e[1]) for e in events] == [
            (f"{turn_id}.1", "start"),
            (f"{turn_id}.2", "token"),
            (f"{turn_id}.3", "end"),
        ]
        assert events[0][2] == original[0][2]  # key, segment and turn id
        assert events[1][2]["content"] == "reply to: what survives a restart"
        replayed_end = events[2][2]
        for field in ("message_id", "message_count", "usage", "status"):
            assert replayed_end[field] == original_end[field], field

        # Owner scoping: another user's turn is answered exactly as an unknown one.
        bob = await resume(second, turn_id, user="bob")
        unknown = await resume(second, UNKNOWN_TURN)
        assert bob.status_code == unknown.status_code == 404
        assert bob.json() == unknown.json()
        assert bob.json()["error"]["code"] == "turn_not_found"

        # The WebSocket `resume` frame reads the store too, each frame marked `replayed`.
        async with connect(f"{second.ws_url}/v1/ws") as ws:
            await ws.send(second.keys["alice"])
            assert await ws.recv() == "authenticated"
            json.loads(await ws.recv())  # ready
            await ws.send(json.dumps({"type": "resume", "turn_id": turn_id, "after": 3}))
            message = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            complete = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
            await ws.send(json.dumps({"type": "resume", "turn_id": UNKNOWN_TURN}))
            missing = json.loads(await asyncio.wait_for(ws.recv(), TIMEOUT))
        assert (message["type"], message["content"]) == (
            "message",
            "reply to: what survives a restart",
        )
        assert message["replayed"] is True and message["event_id"] == f"{turn_id}.2"
        assert complete["type"] == "complete" and complete["frame"] == 1
        assert complete["message_id"] == original_end["message_id"]
        assert (missing["type"], missing["code"], missing["frame"]) == (
            "error",
            "turn_not_found",
            2,
        )


async def test_a_turn_cut_by_shutdown_resumes_as_interrupted(
    tmp_path: Path, database_url: str
) -> None:
    """The gateway stops mid-reply: the partial reply is kept `interrupted`, and after the
    restart a resume answers exactly it."""
    settings = settings_for(tmp_path, database_url)
    model = HeldModel(HELD_AFTER)
    with running_gateway(settings, {"scripted": model}, keys=add_users(settings)) as first:
        async with (
            httpx.AsyncClient(base_url=first.url, timeout=TIMEOUT) as http,
            http.stream(
                "POST",
                "/v1/sessions/resume:cut/messages",
                json={"content": "hold cut me short"},
                headers=first.auth("alice"),
            ) as response,
        ):
            async for chunk in response.aiter_text():
                if '"turn_id"' in chunk:
                    turn_id = parse_events(chunk)[0][2]["turn_id"]
                    break
            await wait_until(model.gate("cut")[0])
        keys = first.keys
    # The gateway stopped while the model was held: the turn was cancelled there.
    with running_gateway(settings, {"scripted": model}, keys=keys) as second:
        response = await resume(second, turn_id)
    model.release("cut")
    events = parse_events(response.text)
    assert [e[1] for e in events] == ["start", "token", "end"]
    assert events[1][2]["content"] == "reply to:"  # the HELD_AFTER words that were sent
    assert events[2][2]["status"] == "interrupted"
    assert events[2][2]["message_id"].endswith(":2")


def test_a_killed_turn_resumes_with_what_the_store_has(tmp_path: Path) -> None:
    """SIGKILL after the user message was committed: nothing of the reply was stored, and
    the restarted gateway says so at once (no process holds a SQLite key any more)."""
    ready = tmp_path / "ready"
    kill_when_ready(CRASH_CHILD, [str(tmp_path), str(ready), "1"], ready, "the user commit")
    db = sqlite3.connect(tmp_path / "sessiongate.db")
    try:
        (metadata,) = db.execute(
            "SELECT metadata FROM messages WHERE role = 'user' ORDER BY id DESC LIMIT 1"
        ).fetchone()
    finally:
        db.close()
    turn_id = json.loads(metadata)["turn_id"]

    async def resumed() -> httpx.Response:
        return await resume(gw, turn_id)

    with running_gateway(gateway_settings(tmp_path), {"scripted": HeldModel(HELD_AFTER)}) as gw:
        response = asyncio.run(asyncio.wait_for(resumed(), 5))  # no waiting on a dead turn
    events = parse_events(response.text)
    assert [e[1] for e in events] == ["start", "error"]
    assert events[0][2]["session_key"] == "chat:alice"
    assert events[1][2]["code"] == NO_REPLY.code == "interrupted"


# -- across workers ---------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
async def test_a_turn_running_on_one_engine_is_resumed_on_another(
    tmp_path: Path, database_url: str
) -> None:
    model = HeldModel(HELD_AFTER)
    settings_a = settings_for(tmp_path / "a", database_url)
    settings_b = settings_for(tmp_path / "b", database_url)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with (
        running_gateway(settings_a, {"scripted": model}, keys=add_users(settings_a)) as a,
        running_gateway(settings_b, {"scripted": model}, keys=a.keys) as b,
    ):
        running = asyncio.create_task(stream_turn(a, "resume:workers", "hold far away"))
        await wait_until(model.gate("far")[0])
        turn_id = await stored_turn_id(database_url, "hold far away")
        waiting = asyncio.create_task(resume(b, turn_id))
        await asyncio.sleep(0.5)
        assert not waiting.done(), "B answered before the turn on A ended"
        model.release("far")
        original = await running
        response = await waiting
        assert (await resume(b, turn_id, user="bob")).status_code == 404
    events = parse_events(response.text)
    assert [e[1] for e in events] == ["start", "token", "end"]
    assert events[1][2]["content"] == "reply to: hold far away"
    assert events[2][2]["message_id"] == original[-1][2]["message_id"]
    assert events[2][2]["status"] == "complete"


async def stored_turn_id(database_url: str, content: str) -> str:
    conn = await asyncpg.connect(database_url)
    try:
        metadata = await conn.fetchval(
            "SELECT metadata::text FROM messages WHERE content = $1 AND role = 'user'", content
        )
    finally:
        await conn.close()
    return str(json.loads(metadata)["turn_id"])


# -- the lookup is indexed ----------------------------------------------------------------


async def test_the_lookup_uses_the_turn_index(tmp_path: Path, database_url: str) -> None:
    settings = settings_for(tmp_path, database_url)
    keys = add_users(settings)
    with running_gateway(settings, {"scripted": HeldModel(HELD_AFTER)}, keys=keys) as gw:
        await stream_turn(gw, "resume:index", "index me")
    if not database_url:
        db = sqlite3.connect(tmp_path / "sessiongate.db")
        try:
            plan = db.execute(
                f"EXPLAIN QUERY PLAN {sqlite_turns.FIND_TURN_SQL}", (UNKNOWN_TURN, 10)
            ).fetchall()
        finally:
            db.close()
        text = " ".join(str(row[-1]) for row in plan)
        assert "USING INDEX messages_by_turn" in text, text
        return
    conn = await asyncpg.connect(database_url)
    try:
        await conn.execute("SET enable_seqscan = off")
        query = postgres_turns.FIND_TURN_SQL.replace("$1", "'x'").replace("$2", "10")
        plan = await conn.fetch(f"EXPLAIN {query}")
    finally:
        await conn.close()
    text = "\n".join(row[0] for row in plan)
    assert "messages_by_turn" in text and "Seq Scan on messages" not in text, text


# -- the functional core and the wait -------------------------------------------------------


def message(seq: int, role: Role, content: str, **metadata: Any) -> Message:
    from datetime import UTC, datetime

    status = metadata.pop("status", MessageStatus.COMPLETE)
    return Message("s1", seq, role, content, status, datetime(2026, 1, 1, tzinfo=UTC), metadata)


def stored(*messages: Message, superseded: bool = False) -> StoredTurn:
    return StoredTurn(UNKNOWN_TURN, KeyRef("alice", "k"), "s1", messages, superseded)


def test_what_a_stored_turn_answers() -> None:
    user = message(1, Role.USER, "hi", turn_id=UNKNOWN_TURN)
    truncated = message(4, Role.ASSISTANT, "long", truncated=True, usage={"total_tokens": 3})
    asked_tools = message(2, Role.ASSISTANT, "let me look", tool_calls=[{"id": "c"}])
    assert ending_events(stored(user, asked_tools, truncated)) == [
        TokenEvent("long"),
        EndEvent("s1:4", 4, {"total_tokens": 3}, "truncated"),
    ]
    unsafe = message(1, Role.USER, "bad", classification={"label": "unsafe"})
    [error] = ending_events(stored(unsafe, superseded=True))
    assert isinstance(error, ErrorEvent) and error.code == "unsafe_request"
    assert ending_events(stored(user, superseded=True)) == [NO_REPLY]
    empty_cut = message(2, Role.ASSISTANT, "", status=MessageStatus.INTERRUPTED)
    assert ending_events(stored(user, empty_cut)) == [EndEvent("s1:2", 2, {}, "interrupted")]


class FakeRecords:
    """A turn that stays unanswered while its key is held `busy_for` polls."""

    def __init__(self, turn: StoredTurn, busy_for: int) -> None:
        self.turn = turn
        self.busy_for = busy_for
        self.polls = 0

    async def find_turn(self, owner: str, turn_id: str) -> StoredTurn | None:
        return self.turn if owner == "alice" else None

    async def key_busy(self, key: KeyRef) -> bool:
        self.polls += 1
        return self.polls <= self.busy_for


async def test_the_wait_ends_at_the_deadline_or_when_the_key_is_free() -> None:
    user = message(1, Role.USER, "hi", turn_id=UNKNOWN_TURN, agent="main")
    clock = [0.0]
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)
        clock[0] += seconds

    held = FakeRecords(stored(user), busy_for=10**6)
    replay = StoredTurnReplay(
        held, held.turn, "alice", timedelta(seconds=5), sleep=sleep, now=lambda: clock[0]
    )
    events = [event async for _, event in replay.follow(after=7)]
    assert events == [StartEvent("k", "s1", UNKNOWN_TURN), NO_REPLY]
    assert clock[0] == pytest.approx(5.0)  # bounded by the wait limit
    assert slept[:3] == [0.05, 0.1, 0.2] and max(slept) <= 1.0  # backoff, capped

    freed = FakeRecords(stored(user), busy_for=2)
    slept.clear()
    replay = StoredTurnReplay(
        freed, freed.turn, "alice", timedelta(minutes=10), sleep=sleep, now=lambda: clock[0]
    )
    await replay.settle()
    assert freed.polls == 3 and len(slept) == 2  # stopped once no process held the key


class HangingTurn:
    """A replay still waiting for its turn: `start`, then nothing until cancelled."""

    turn_id = UNKNOWN_TURN
    owner = "alice"
    key = "k"

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    async def follow(self, after: int) -> AsyncIterator[tuple[int, TurnEvent]]:
        yield 1, StartEvent("k", "s1", UNKNOWN_TURN)
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        yield 2, NO_REPLY  # never reached


async def test_a_waiting_stream_sends_keepalives_and_stops_when_closed() -> None:
    turn = HangingTurn()
    frames = _frames(turn, 0, keepalive=0.01)
    assert isinstance(frames, AsyncGenerator)
    first = await anext(frames)
    assert first.startswith(b"event: start\n") and f"id: {UNKNOWN_TURN}.1".encode() in first
    assert await anext(frames) == KEEPALIVE == await anext(frames)
    await frames.aclose()  # what the server does when the client has gone
    await asyncio.wait_for(turn.cancelled.wait(), TIMEOUT)
