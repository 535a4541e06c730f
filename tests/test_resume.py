"""Resumable turn streams (issue 11): SSE ids, `GET /v1/turns/{id}/events`, the WebSocket
`resume` frame and `event_id`, and a joined idempotent retry that skips what its client saw.

A real gateway on loopback; the model holds a reply half-way until the test releases it,
so connections can be dropped mid-turn for real.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import ClientConnection, connect

from sessiongate.config import Settings
from sessiongate.service.turn.journal import TurnJournal
from tests.support.gateway import Gateway, gateway_settings, running_gateway
from tests.support.held_model import HeldModel

TIMEOUT = 10.0
#: The model stops after this many tokens of a `hold <tag> …` message until released.
HELD_AFTER = 3
UNKNOWN_TURN = "01890000-0000-7000-8000-000000000000"

Event = tuple[str, str, dict[str, Any]]  # (id, event type, data)


@pytest.fixture(scope="module")
def model() -> HeldModel:
    return HeldModel(HELD_AFTER)


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory, model: HeldModel) -> Iterator[Gateway]:
    path: Path = tmp_path_factory.mktemp("resume")
    with running_gateway(gateway_settings(path), {"scripted": model}) as gateway:
        yield gateway


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory, model: HeldModel) -> Iterator[Gateway]:
    """A gateway that keeps two finished turns at most."""
    path: Path = tmp_path_factory.mktemp("resume-small")
    limits = {"max_body_bytes": 65536, "turn_replay_turns": 2}
    with running_gateway(gateway_settings(path, limits=limits), {"scripted": model}) as gateway:
        yield gateway


@pytest.fixture
async def http(gw: Gateway) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(
        base_url=gw.url, headers=gw.auth("alice"), timeout=TIMEOUT
    ) as client:
        yield client


# -- helpers ----------------------------------------------------------------------------


def parse_events(text: str) -> list[Event]:
    """SSE blocks as (id, type, data); every block of a turn must carry an id."""
    events: list[Event] = []
    for block in text.strip().split("\n\n"):
        if not block:
            continue
        fields = dict(line.split(": ", 1) for line in block.splitlines())
        events.append((fields["id"], fields["event"], json.loads(fields["data"])))
    return events


async def read_until(
    response: httpx.Response, stop: int, *, tokens: bool = True
) -> tuple[list[Event], str]:
    """Events of a streaming response until `stop` tokens (or events) were read; the rest
    of the buffer is left unread."""
    buffer = ""
    events: list[Event] = []
    async with asyncio.timeout(TIMEOUT):
        async for chunk in response.aiter_text():
            buffer += chunk
            while "\n\n" in buffer:
                block, buffer = buffer.split("\n\n", 1)
                events.extend(parse_events(block))
            count = sum(1 for e in events if e[1] == "token") if tokens else len(events)
            if count >= stop:
                return events, buffer
    return events, buffer


def seq_of(event_id: str) -> int:
    return int(event_id.rsplit(".", 1)[1])


def reply_text(events: list[Event]) -> str:
    return "".join(data["content"] for _, kind, data in events if kind == "token")


async def stored_reply(http: httpx.AsyncClient, key: str) -> str:
    shown = (await http.get(f"/v1/sessions/{key}")).json()
    sid = shown["latest"]["session_id"]
    page = (await http.get(f"/v1/sessions/{key}/segments/{sid}/messages?limit=100")).json()
    last = page["messages"][-1]
    assert last["role"] == "assistant" and last["status"] == "complete", last
    return str(last["content"])


async def full_turn(http: httpx.AsyncClient, key: str, content: str) -> list[Event]:
    response = await http.post(f"/v1/sessions/{key}/messages", json={"content": content})
    assert response.status_code == 200, response.text
    return parse_events(response.text)


async def resume(
    http: httpx.AsyncClient, turn_id: str, headers: dict[str, str] | None = None, **params: Any
) -> httpx.Response:
    return await http.get(f"/v1/turns/{turn_id}/events", headers=headers, params=params)


def assert_contiguous(events: list[Event], turn_id: str, first: int = 1) -> None:
    assert [e[0] for e in events] == [f"{turn_id}.{n}" for n in range(first, first + len(events))]


# -- SSE ids ------------------------------------------------------------------------------


async def test_every_sse_event_of_a_turn_carries_its_id(http: httpx.AsyncClient) -> None:
    events = await full_turn(http, "resume:ids", "number the events")
    assert events[0][1] == "start"
    turn_id = events[0][2]["turn_id"]
    assert_contiguous(events, turn_id)
    assert events[-1][1] == "end"
    assert reply_text(events) == "reply to: number the events"

    routed = await http.post("/v1/chat", json={"content": "routed ids"})
    routed_events = parse_events(routed.text)
    assert_contiguous(routed_events, routed_events[0][2]["turn_id"])


# -- GET /v1/turns/{id}/events -------------------------------------------------------------


async def test_dropped_stream_resumes_live_without_gap_or_duplicate(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "resume:drop"
    content = "hold drop one two three four five six seven"
    async with http.stream(
        "POST", f"/v1/sessions/{key}/messages", json={"content": content}
    ) as response:
        seen, _ = await read_until(response, HELD_AFTER)
    # The connection is gone, the turn still holds; resume while it runs.
    turn_id = seen[0][2]["turn_id"]
    last_id = seen[-1][0]
    assert seen[-1][1] == "token"
    async with http.stream(
        "GET", f"/v1/turns/{turn_id}/events", headers={"Last-Event-ID": last_id}
    ) as resumed:
        assert resumed.status_code == 200
        assert resumed.headers["content-type"].startswith("text/event-stream")
        model.release("drop")
        rest = parse_events((await resumed.aread()).decode())
    assert rest[0][0] == f"{turn_id}.{seq_of(last_id) + 1}"
    assert rest[-1][1] == "end"
    everything = seen + rest
    assert_contiguous(everything, turn_id)
    assert reply_text(everything) == await stored_reply(http, key)
    assert reply_text(everything) == f"reply to: {content}"


async def test_finished_turn_resumes_with_what_is_left(http: httpx.AsyncClient) -> None:
    events = await full_turn(http, "resume:done", "a finished turn to read again")
    turn_id = events[0][2]["turn_id"]
    whole = await resume(http, turn_id, {"Last-Event-ID": f"{turn_id}.0"})
    assert whole.status_code == 200
    assert parse_events(whole.text) == events  # n=0: everything, the same frames and ids

    tail = await resume(http, turn_id, {"Last-Event-ID": f"{turn_id}.3"})
    assert parse_events(tail.text) == events[3:]
    by_query = await resume(http, turn_id, after=len(events) - 1)
    assert parse_events(by_query.text) == events[-1:]
    # The header wins over the query.
    both = await resume(http, turn_id, {"Last-Event-ID": f"{turn_id}.2"}, after=0)
    assert parse_events(both.text) == events[2:]
    nothing = await resume(http, turn_id, after=len(events))
    assert nothing.status_code == 200 and nothing.text == ""


async def test_huge_seqs_never_fail(http: httpx.AsyncClient) -> None:
    events = await full_turn(http, "resume:huge", "big numbers")
    turn_id = events[0][2]["turn_id"]
    biggest = await resume(http, turn_id, {"Last-Event-ID": f"{turn_id}.{2**63 - 1}"})
    assert biggest.status_code == 200 and biggest.text == ""
    for value in (f"{turn_id}.{10**30}", f"{turn_id}.{'9' * 5000}"):
        response = await resume(http, turn_id, {"Last-Event-ID": value})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "invalid_last_event_id"
    response = await resume(http, turn_id, after="9" * 5000)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_last_event_id"


async def test_resume_refuses_what_it_must(gw: Gateway, http: httpx.AsyncClient) -> None:
    events = await full_turn(http, "resume:mine", "only alice reads this")
    turn_id = events[0][2]["turn_id"]
    async with httpx.AsyncClient(base_url=gw.url, timeout=TIMEOUT) as other:
        bob = await other.get(f"/v1/turns/{turn_id}/events", headers=gw.auth("bob"))
        admin = await other.get(f"/v1/turns/{turn_id}/events", headers=gw.auth("root"))
        anonymous = await other.get(f"/v1/turns/{turn_id}/events")
    unknown = await resume(http, UNKNOWN_TURN)
    for response in (bob, admin, unknown):
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "turn_not_found"
    # Another user's turn and an unknown one are answered alike.
    assert bob.json() == unknown.json()
    assert anonymous.status_code == 401

    for bad in ("not-a-turn", "A" * 300, UNKNOWN_TURN[:-1] + "A", "x.1"):
        response = await resume(http, bad)
        assert response.status_code == 400, bad
        assert response.json()["error"]["code"] == "invalid_turn_id"
    for header in (f"{UNKNOWN_TURN}.1", f"{turn_id}.-1", f"{turn_id}.x", turn_id, "", "3"):
        response = await resume(http, turn_id, {"Last-Event-ID": header})
        assert response.status_code == 400, header
        assert response.json()["error"]["code"] == "invalid_last_event_id"
    for after in ("-1", "1.5", "abc", ""):
        response = await resume(http, turn_id, after=after)
        assert response.status_code == 400, after
        assert response.json()["error"]["code"] == "invalid_last_event_id"


async def test_journal_keeps_a_bounded_number_of_finished_turns(small: Gateway) -> None:
    async with httpx.AsyncClient(
        base_url=small.url, headers=small.auth("alice"), timeout=TIMEOUT
    ) as http:
        ids = []
        for n in range(3):
            events = await full_turn(http, "resume:bound", f"turn {n}")
            ids.append(events[0][2]["turn_id"])
        # Forgotten by the journal, the oldest is read back from the store, from `start`.
        oldest = await resume(http, ids[0], after="2")
        assert oldest.status_code == 200
        assert [e[1] for e in parse_events(oldest.text)] == ["start", "token", "end"]
        for turn_id in ids[1:]:
            kept = await resume(http, turn_id)
            assert kept.status_code == 200
            assert parse_events(kept.text)[-1][1] == "end"
    journal = small.engine.turn_journal
    assert journal is not None and len(journal) == 2


async def test_finished_turns_expire_after_the_retention(small: Gateway) -> None:
    journal = small.engine.turn_journal
    assert journal is not None
    async with httpx.AsyncClient(
        base_url=small.url, headers=small.auth("alice"), timeout=TIMEOUT
    ) as http:
        events = await full_turn(http, "resume:expiry", "soon forgotten")
        turn_id = events[0][2]["turn_id"]
        assert (await resume(http, turn_id)).status_code == 200
        real_now = journal.now
        later = real_now() + journal.retention + 1
        journal.now = lambda: later  # the journal's clock, moved past the retention
        try:
            expired = await resume(http, turn_id)
        finally:
            journal.now = real_now
    # Expired from the journal: read back from the store, restated from `start`.
    assert expired.status_code == 200
    assert [e[1] for e in parse_events(expired.text)] == ["start", "token", "end"]


def test_the_limits_have_their_documented_defaults() -> None:
    limits = Settings().limits
    assert limits.turn_replay_retention == timedelta(minutes=10)
    assert limits.turn_replay_turns == 1000
    assert Settings(limits={"turn_replay_retention": "90s"}).limits.turn_replay_retention == (
        timedelta(seconds=90)
    )


async def test_a_kept_turn_replays_token_runs_exactly() -> None:
    """The compact form of a finished turn gives back the very events, from any seq."""
    from sessiongate.core.events import EndEvent, StartEvent, TokenEvent, TurnEvent
    from sessiongate.service.turn.handle import TurnHandle

    journal = TurnJournal(max_finished=5)
    handle = TurnHandle(UNKNOWN_TURN)
    journal.register(handle, "alice", "k")
    emitted: list[TurnEvent] = [
        StartEvent("k", "s", UNKNOWN_TURN),
        TokenEvent("a"),
        TokenEvent(""),
        TokenEvent("bc"),
        TokenEvent("d"),
        EndEvent("m", 2),
        TokenEvent("late"),
    ]
    for event in emitted:
        handle.emit(event)
    handle.close()
    turn = journal.find(UNKNOWN_TURN, "alice")
    for after in range(len(emitted) + 2):
        again = [pair async for pair in turn.follow(after)]
        assert again == list(enumerate(emitted, 1))[after:]


# -- the idempotent retry ------------------------------------------------------------------


async def test_joined_retry_skips_the_events_its_client_saw(
    model: HeldModel, http: httpx.AsyncClient
) -> None:
    key = "resume:idem"
    content = "hold idem alpha beta gamma delta"
    headers = {"Idempotency-Key": "resume-idem-1"}
    url = f"/v1/sessions/{key}/messages"
    async with http.stream("POST", url, json={"content": content}, headers=headers) as first:
        seen, _ = await read_until(first, HELD_AFTER)
    turn_id = seen[0][2]["turn_id"]
    retry_headers = {**headers, "Last-Event-ID": seen[-1][0]}
    async with http.stream("POST", url, json={"content": content}, headers=retry_headers) as again:
        assert again.status_code == 200
        model.release("idem")
        rest = parse_events((await again.aread()).decode())
    assert rest[0][0] == f"{turn_id}.{len(seen) + 1}"
    everything = seen + rest
    assert_contiguous(everything, turn_id)
    assert reply_text(everything) == await stored_reply(http, key)

    # The turn ended: a retry is a replay of its own, whole, from `start`, ids from 1.
    replayed = await http.post(url, json={"content": content}, headers=retry_headers)
    events = parse_events(replayed.text)
    assert events[0][1] == "start" and events[0][2]["turn_id"] == turn_id
    assert_contiguous(events, turn_id)
    assert [kind for _, kind, _ in events] == ["start", "token", "end"]
    assert reply_text(events) == f"reply to: {content}"


# -- WebSocket -----------------------------------------------------------------------------


async def recv_json(ws: ClientConnection) -> dict[str, Any]:
    raw = await asyncio.wait_for(ws.recv(), TIMEOUT)
    assert isinstance(raw, str)
    frame = json.loads(raw)
    assert isinstance(frame, dict)
    return frame


@asynccontextmanager
async def socket(gw: Gateway, user: str = "alice") -> AsyncIterator[ClientConnection]:
    async with connect(
        gw.ws_url + "/v1/ws?session_id=resume:ws", open_timeout=TIMEOUT, proxy=None
    ) as ws:
        await ws.send(gw.keys[user])
        assert await asyncio.wait_for(ws.recv(), TIMEOUT) == "authenticated"
        assert (await recv_json(ws))["type"] == "ready"
        yield ws


async def frames_until_end(ws: ClientConnection) -> list[dict[str, Any]]:
    frames = []
    while True:
        frame = await recv_json(ws)
        frames.append(frame)
        if frame["type"] in ("complete", "error"):
            return frames


async def test_socket_turn_frames_carry_event_ids(gw: Gateway) -> None:
    async with socket(gw) as ws:
        await ws.send(json.dumps({"content": "ids on the socket"}))
        frames = await frames_until_end(ws)
    assert frames[-1]["type"] == "complete"
    turn_ids = {f["event_id"].rsplit(".", 1)[0] for f in frames}
    assert len(turn_ids) == 1
    seqs = [seq_of(f["event_id"]) for f in frames]
    assert seqs == sorted(set(seqs)) and seqs[0] >= 2  # `start` (1) has no frame here


async def test_socket_closed_mid_turn_resumes_on_a_new_socket(
    gw: Gateway, model: HeldModel, http: httpx.AsyncClient
) -> None:
    content = "hold wsdrop one two three four five"
    seen: list[dict[str, Any]] = []
    async with socket(gw) as ws:
        await ws.send(json.dumps({"content": content}))
        while len([f for f in seen if f["type"] == "message"]) < HELD_AFTER:
            seen.append(await recv_json(ws))
    turn_id, last = seen[-1]["event_id"].rsplit(".", 1)
    async with socket(gw) as ws:
        await ws.send(json.dumps({"type": "resume", "turn_id": turn_id, "after": int(last)}))
        await asyncio.sleep(0.05)
        model.release("wsdrop")
        rest = await frames_until_end(ws)
    assert seq_of(rest[0]["event_id"]) == int(last) + 1
    assert rest[-1]["type"] == "complete" and rest[-1]["frame"] == 1
    everything = seen + rest
    seqs = [seq_of(f["event_id"]) for f in everything]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))  # no gap, no duplicate
    text = "".join(f["content"] for f in everything if f["type"] == "message")
    assert text == f"reply to: {content}" == await stored_reply(http, "resume:ws")


async def test_socket_resume_errors_keep_the_socket_open(gw: Gateway) -> None:
    async with socket(gw) as ws:
        await ws.send(json.dumps({"content": "a turn to resume"}))
        frames = await frames_until_end(ws)
        turn_id = frames[0]["event_id"].rsplit(".", 1)[0]
        cases = [
            ({"type": "resume", "turn_id": "nope"}, "invalid_turn_id"),
            ({"type": "resume"}, "invalid_turn_id"),
            ({"type": "resume", "turn_id": UNKNOWN_TURN}, "turn_not_found"),
            ({"type": "resume", "turn_id": turn_id, "after": -1}, "invalid_request"),
            ({"type": "resume", "turn_id": turn_id, "after": "3"}, "invalid_request"),
            ({"type": "resume", "turn_id": turn_id, "after": 10**30}, "invalid_request"),
        ]
        for number, (frame, code) in enumerate(cases, start=2):
            await ws.send(json.dumps(frame))
            error = await recv_json(ws)
            assert (error["type"], error["code"], error["frame"]) == ("error", code, number)
        # A finished turn: what is left after `after`, then the socket goes on as before.
        await ws.send(json.dumps({"type": "resume", "turn_id": turn_id, "after": 0}))
        again = await frames_until_end(ws)
        assert [f["event_id"] for f in again] == [f["event_id"] for f in frames]
        assert [f["content"] for f in again[:-1]] == [f["content"] for f in frames[:-1]]
        after_all = seq_of(frames[-1]["event_id"])
        await ws.send(json.dumps({"type": "resume", "turn_id": turn_id, "after": after_all}))
        await ws.send(json.dumps({"content": "still open"}))
        next_turn = await frames_until_end(ws)
        assert next_turn[-1]["type"] == "complete" and next_turn[-1]["frame"] == 10
    async with socket(gw, "bob") as ws:
        await ws.send(json.dumps({"type": "resume", "turn_id": turn_id}))
        assert (await recv_json(ws))["code"] == "turn_not_found"


async def test_socket_resume_runs_beside_the_sockets_turns(gw: Gateway, model: HeldModel) -> None:
    """A resumed turn that is still held does not hold up the socket's own turns."""
    async with socket(gw) as first:
        await first.send(json.dumps({"content": "hold beside x y z", "session_id": "resume:b"}))
        frame = await recv_json(first)
        turn_id = frame["event_id"].rsplit(".", 1)[0]
        async with socket(gw) as second:
            await second.send(json.dumps({"type": "resume", "turn_id": turn_id}))
            await second.send(json.dumps({"content": "meanwhile", "session_id": "resume:c"}))
            own: list[dict[str, Any]] = []
            resumed: list[dict[str, Any]] = []
            while not own or own[-1]["type"] != "complete":
                got = await recv_json(second)
                mine = got["event_id"].startswith(turn_id)
                (resumed if mine else own).append(got)
            assert "".join(f["content"] for f in own if f["type"] == "message") == (
                "reply to: meanwhile"
            )
            assert all(f["type"] != "complete" for f in resumed)  # still held
            model.release("beside")
            while not resumed or resumed[-1]["type"] != "complete":
                resumed.append(await recv_json(second))
        assert (await frames_until_end(first))[-1]["type"] == "complete"
    text = "".join(f["content"] for f in resumed if f["type"] == "message")
    assert text == "reply to: hold beside x y z"
