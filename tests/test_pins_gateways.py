"""Pins made through another gateway (issue 21, DESIGN.md §12): a process keeps each
segment's pins in memory, and whenever a thread that needs fitting asks for them, one
small query (the segment's pin stamp: a version every pin and unpin moves, and the pin
count) tells whether another process pinned or unpinned since. So a pin made on one
gateway holds on the other's next turn, an unpin is let go, and the short thread still
reads nothing. The stamp on both stores; two engines on one database (SQLite and
PostgreSQL); two `sessiongate serve` processes on one PostgreSQL database."""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.pins import pin_store
from sessiongate.service.sessions import Caller
from sessiongate.store.pins import PinStamp
from tests.conftest import START
from tests.support.helpers import ScriptedModel, collect
from tests.support.served_cluster import served_cluster
from tests.test_pins import SECRET, settings

KEY = "c:shared"
ALICE = Caller("alice")


def gateway(tmp_path: Path, database_url: str, model: ScriptedModel) -> Engine:
    """One gateway of two on the same database (the same data_dir: one SQLite file),
    configured as test_pins.py's: the window alone leaves messages out."""
    return build_engine(
        settings(tmp_path, database_url), clock=ManualClock(START), models={"scripted": model}
    )


def sent_raw(model: ScriptedModel, asked: str, content: str) -> bool:
    """Whether the request that asked `asked` carried `content` as a message of its own
    (a summary quoting it does not count)."""
    request = next(r for r in model.requests if r[-1]["content"] == asked)
    return any(m["content"] == content for m in request if m["role"] != "system")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_the_stamp_moves_at_every_pin_and_unpin(tmp_path: Path, database_url: str) -> None:
    engine = gateway(tmp_path, database_url, ScriptedModel())
    await engine.start()
    try:
        for text in [SECRET, "one", "two"]:
            await collect(engine, text, key=KEY)
        segment = await engine.store.latest_segment(KeyRef("alice", KEY))
        rows = pin_store(engine.store)
        assert rows is not None
        sid = segment.session_id
        assert await rows.stamp(sid) == (0, 0)  # never pinned
        assert await rows.stamp("no-such-segment") == (0, 0)
        assert await rows.pin(sid, 1, START)
        assert await rows.stamp(sid) == (1, 1)
        assert not await rows.pin(sid, 1, START)  # pinned already: nothing moves
        assert not await rows.unpin(sid, 5)  # never pinned: nothing moves
        assert await rows.stamp(sid) == (1, 1)
        assert await rows.pin(sid, 3, START)
        two: PinStamp = await rows.stamp(sid)
        assert two == (2, 2)
        # Unpin one, pin another: the same count, yet the stamp differs.
        assert await rows.unpin(sid, 1)
        assert await rows.pin(sid, 5, START)
        assert await rows.stamp(sid) == (4, 2) != two
        assert [m.seq for m in await rows.pinned(sid)] == [3, 5]
        # Erased with the segment.
        await engine.sessions.delete(KEY, ALICE)
        assert await rows.stamp(sid) == (0, 0)
    finally:
        await engine.aclose()


def counted(calls: list[str], name: str, call: Callable[..., Awaitable[Any]]) -> Any:
    async def counting(*args: Any) -> Any:
        calls.append(name)
        return await call(*args)

    return counting


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_pin_made_on_one_gateway_holds_on_the_other(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    model_a, model_b = ScriptedModel(), ScriptedModel()
    a, b = gateway(tmp_path, database_url, model_a), gateway(tmp_path, database_url, model_b)
    await a.start()
    await b.start()
    try:
        # B counts what it asks the store about pins.
        rows_b = b.turns.compactor.pins.rows
        assert rows_b is not None
        calls: list[str] = []
        monkeypatch.setattr(rows_b, "stamp", counted(calls, "stamp", rows_b.stamp))
        monkeypatch.setattr(rows_b, "pinned", counted(calls, "pinned", rows_b.pinned))
        # The common short thread reads no pins at all.
        await collect(b, "short one", key="c:short")
        await collect(b, "short two", key="c:short")
        assert calls == []

        for text in [SECRET, "one", "two", "three"]:
            await collect(a, text, key=KEY)
        await a.turns.drain()
        # B's turn: past the window, so B reads the segment's pins (none) and keeps them.
        await collect(b, "b first", key=KEY)
        await b.turns.drain()
        assert calls == ["stamp", "pinned"]
        assert not sent_raw(model_b, "b first", SECRET)

        segment = await a.store.latest_segment(KeyRef("alice", KEY))
        first, _, third = await a.sessions.messages(KEY, ALICE, segment.session_id, limit=3)
        assert (first.content, third.content) == (SECRET, "one")
        assert await a.turns.compactor.pins.pin(first, 1536)

        # B's next turn asks (one small query), finds the stamp moved, and sends the pin.
        calls.clear()
        await collect(b, "b second", key=KEY)
        await b.turns.drain()
        assert sent_raw(model_b, "b second", SECRET)
        assert calls == ["stamp", "pinned"]
        # Nothing changed since: one query, the copy kept.
        calls.clear()
        assert [m.seq for m in await b.turns.compactor.pins.pinned(segment.session_id)] == [1]
        assert calls == ["stamp"]

        # Unpin on B: A (which pinned it itself) lets it go at its next turn.
        assert await b.turns.compactor.pins.unpin(first)
        await collect(a, "a again", key=KEY)
        await a.turns.drain()
        assert not sent_raw(model_a, "a again", SECRET)

        # Unpin one and pin another on A (the same count of pins): B sees the swap.
        assert await a.turns.compactor.pins.pin(first, 1536)
        await collect(b, "b third", key=KEY)
        assert sent_raw(model_b, "b third", SECRET)
        assert await a.turns.compactor.pins.unpin(first)
        assert await a.turns.compactor.pins.pin(third, 1536)
        await collect(b, "b fourth", key=KEY)
        await b.turns.drain()
        assert not sent_raw(model_b, "b fourth", SECRET)
        assert sent_raw(model_b, "b fourth", "one")
        assert await b.turns.compactor.pins.pinned(segment.session_id) == (third,)
    finally:
        await a.aclose()
        await b.aclose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_pin_racing_another_gateways_pin_is_read_again(
    tmp_path: Path, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process keeps its own pin without reading again; had another one pinned between
    its read and its write, the stamp tells, and the next read asks the store."""
    a = gateway(tmp_path, database_url, ScriptedModel())
    b = gateway(tmp_path, database_url, ScriptedModel())
    await a.start()
    await b.start()
    try:
        for text in [SECRET, "one", "two"]:
            await collect(a, text, key=KEY)
        segment = await a.store.latest_segment(KeyRef("alice", KEY))
        messages = await a.sessions.messages(KEY, ALICE, segment.session_id, limit=3)
        board_a, board_b = a.turns.compactor.pins, b.turns.compactor.pins
        rows_a = board_a.rows
        assert rows_a is not None
        write = rows_a.pin

        async def racing(session_id: str, seq: int, now: datetime) -> bool:
            assert await board_b.pin(messages[2], None)  # B, between A's read and write
            return await write(session_id, seq, now)

        monkeypatch.setattr(rows_a, "pin", racing)
        assert await board_a.pin(messages[0], None)
        # A's copy holds what A expects; the stamp says another change came with it.
        assert [m.seq for m in await board_a.pinned(segment.session_id, fresh=False)] == [1]
        assert [m.seq for m in await board_a.pinned(segment.session_id)] == [1, 3]
        # And when nothing else changed, A's own pin needs no read: its copy is current.
        monkeypatch.setattr(rows_a, "pin", write)
        assert await board_a.pin(messages[1], None)
        calls: list[str] = []
        monkeypatch.setattr(rows_a, "pinned", counted(calls, "pinned", rows_a.pinned))
        assert [m.seq for m in await board_a.pinned(segment.session_id)] == [1, 2, 3]
        assert calls == []
    finally:
        await a.aclose()
        await b.aclose()


#: A relay model that answers as tests/support/served.py's echo relay and writes every
#: request it gets, one JSON line each, to the file named by its argument.
RECORDING_RELAY = """\
import json, sys
body = json.load(sys.stdin)
with open(sys.argv[1], "a", encoding="utf-8") as log:
    log.write(json.dumps(body["messages"]) + "\\n")
content = body["messages"][-1].get("content", "")
first = str(body["messages"][0].get("content", ""))
if first.startswith("You compact the earlier part"):
    said = [line.split(": ", 1)[1] for line in content.splitlines() if " user: " in line]
    sys.stdout.write("summary: " + "; ".join(said))
else:
    sys.stdout.write(f"reply to: {content}")
"""


def received(log: Path, asked: str) -> list[dict[str, Any]]:
    """The messages of the (last) request that asked `asked`."""
    requests = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    found = [r for r in requests if r[-1].get("content") == asked]
    assert found, f"no request asked {asked!r}"
    return list(found[-1])


def raw(messages: list[dict[str, Any]], content: str) -> bool:
    return any(m["content"] == content for m in messages if m["role"] != "system")


def turn(http: httpx.Client, text: str) -> None:
    answer = http.post(f"/v1/sessions/{KEY}/messages", json={"content": text, "stream": False})
    assert answer.status_code == 200, answer.text


def context(http: httpx.Client) -> dict[str, Any]:
    shown = http.get(f"/v1/sessions/{KEY}/context")
    assert shown.status_code == 200, shown.text
    return dict(shown.json())


def test_two_served_gateways_share_their_pins(tmp_path: Path) -> None:
    relay, log = tmp_path / "recording_relay.py", tmp_path / "requests.jsonl"
    relay.write_text(RECORDING_RELAY, encoding="utf-8")
    command = json.dumps([sys.executable, str(relay), str(log)])
    config = (
        f'[models.relay]\nprovider = "command"\ncommand = {command}\ncontext_window = 2048\n'
        '[agents.defaults]\nmodel = "relay"\nmemory_window = 4\n'
        "[agents.defaults.context]\ncompact_at = 1.0\n"
    )
    with (
        served_cluster(tmp_path, config, {"alice": (), "bob": ()}) as gateways,
        gateways[0].client("alice") as a,
        gateways[1].client("alice") as b,
        gateways[1].client("bob") as bob,
    ):
        for text in [SECRET, "one", "two", "three"]:
            turn(a, text)
        # B's turn reads the segment's pins (none yet) and keeps them in memory.
        turn(b, "b first")
        assert not raw(received(log, "b first"), SECRET)
        shown = context(b)
        assert shown["pinned"] == []
        session_id = shown["session_id"]
        first, third = f"{session_id}:1", f"{session_id}:3"

        pinned = a.post(f"/v1/sessions/{KEY}/messages/{first}/pin")
        assert pinned.status_code == 200 and pinned.json()["changed"] is True, pinned.text
        # B lists it, sends it raw in its next turn, and shows it in the context.
        assert context(b)["pinned"] == [first]
        turn(b, "b second")
        assert raw(received(log, "b second"), SECRET)
        shown = context(b)
        assert shown["pinned"] == [first]
        assert [m["content"] for m in shown["messages"] if m["pinned"]] == [SECRET]
        # Pinning it again on B changes nothing: B knows it is pinned.
        again = b.post(f"/v1/sessions/{KEY}/messages/{first}/pin")
        assert again.status_code == 200 and again.json()["changed"] is False

        # Unpin on B: A's next turn no longer treats it as pinned.
        gone = b.delete(f"/v1/sessions/{KEY}/messages/{first}/pin")
        assert gone.status_code == 200 and gone.json()["changed"] is True, gone.text
        turn(a, "a again")
        assert not raw(received(log, "a again"), SECRET)
        assert context(a)["pinned"] == []

        # Pin on A, then on B unpin it and pin another (the same count): A follows.
        assert a.post(f"/v1/sessions/{KEY}/messages/{first}/pin").status_code == 200
        turn(a, "a pins")
        assert raw(received(log, "a pins"), SECRET)
        assert b.delete(f"/v1/sessions/{KEY}/messages/{first}/pin").json()["changed"] is True
        assert b.post(f"/v1/sessions/{KEY}/messages/{third}/pin").json()["changed"] is True
        turn(a, "a swapped")
        sent = received(log, "a swapped")
        assert raw(sent, "one") and not raw(sent, SECRET)
        assert context(a)["pinned"] == [third]

        # Another user's gateway B: the message is theirs to neither see nor pin.
        turn(bob, "mine")
        refused = bob.post(f"/v1/sessions/{KEY}/messages/{third}/pin")
        assert refused.status_code == 404
        assert refused.json()["error"]["code"] == "message_not_found"
