"""Pins (issue 21, DESIGN.md §12): a pinned message stays raw in every context of its
segment, even older than the window and inside a compaction's span; pins that alone
would not fit the agent's budget are refused (409 `pins_exceed_budget`); another user's
message answers as one that never existed. Both stores; through `sessiongate serve`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.pins import pin_store
from sessiongate.service.sessions import Caller
from tests.conftest import START
from tests.support.helpers import ScriptedModel, collect
from tests.support.served import relay_model, served_gateway

SECRET = "the door code is 7781"


def settings(tmp_path: Path, database_url: str, **context: Any) -> Settings:
    return Settings(
        data_dir=tmp_path,
        database={"url": database_url, "pool_size": 4},
        lifecycle={"timezone": "UTC"},
        models={"scripted": {"provider": "offline", "context_window": 2048}},
        agents={
            "defaults": {
                "model": "scripted",
                "memory_window": 4,
                # Nothing compacts on its own here: the window alone leaves messages out.
                "context": {"compaction": "auto", "compact_at": 1.0, **context},
            }
        },
    )


@pytest.fixture
async def pinning(
    tmp_path: Path, database_url: str, scripted: ScriptedModel
) -> AsyncIterator[Engine]:
    built = build_engine(
        settings(tmp_path, database_url),
        clock=ManualClock(START),
        models={"scripted": scripted},
    )
    await built.start()
    yield built
    await built.aclose()


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_pins_are_stored_beside_the_segment_and_erased_with_the_key(
    pinning: Engine,
) -> None:
    await collect(pinning, SECRET, key="c:one")
    segment = await pinning.store.latest_segment(KeyRef("alice", "c:one"))
    rows = pin_store(pinning.store)
    assert rows is not None
    assert await rows.pin(segment.session_id, 1, START)
    assert not await rows.pin(segment.session_id, 1, START)  # already pinned
    (pinned,) = await rows.pinned(segment.session_id)
    assert (pinned.seq, pinned.content) == (1, SECRET)
    assert await rows.pin_times(segment.session_id) == {1: START}
    assert await rows.unpin(segment.session_id, 1)
    assert not await rows.unpin(segment.session_id, 1)
    assert await rows.pinned(segment.session_id) == []
    await rows.pin(segment.session_id, 2, START)
    await pinning.sessions.delete("c:one", Caller("alice"))
    assert await rows.pinned(segment.session_id) == []
    assert await rows.pin_times(segment.session_id) == {}


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_pinned_message_older_than_the_window_is_sent_raw(
    pinning: Engine, scripted: ScriptedModel
) -> None:
    await collect(pinning, SECRET)
    for turn in range(4):
        await collect(pinning, f"turn {turn}")
    caller = Caller("alice")
    segment, before = await pinning.turns.preview_context("chat:alice", caller)
    assert SECRET not in [m.content for m in before.messages]
    (first,) = await pinning.sessions.messages("chat:alice", caller, segment.session_id, limit=1)
    assert await pinning.turns.compactor.pins.pin(first, 1536)
    await collect(pinning, "what is the code?")
    sent = next(r for r in scripted.requests if r[-1]["content"] == "what is the code?")
    contents = [m["content"] for m in sent]
    assert SECRET in contents
    # Pinned messages come before the raw ones after them, the newest message last.
    assert contents.index(SECRET) < contents.index("turn 3") and contents[-1] == (
        "what is the code?"
    )
    # A process that starts afresh reads the pin from the store.
    pinning.turns.compactor.pins._pinned.clear()
    _, after = await pinning.turns.preview_context("chat:alice", caller)
    assert SECRET in [m.content for m in after.messages]
    assert await pinning.turns.compactor.pins.unpin(first)
    _, unpinned = await pinning.turns.preview_context("chat:alice", caller)
    assert SECRET not in [m.content for m in unpinned.messages]


async def test_a_pinned_message_stays_raw_inside_a_compaction(tmp_path: Path) -> None:
    def reply(messages: Any) -> str:
        if str(messages[0]["content"]).startswith("You compact the earlier part"):
            return "they chatted"
        return f"reply to: {messages[-1]['content']}"

    scripted = ScriptedModel(reply=reply)
    gw = build_engine(
        settings(tmp_path, "", keep_recent=2),
        clock=ManualClock(START),
        models={"scripted": scripted},
    )
    await gw.start()
    try:
        await collect(gw, SECRET)
        for turn in range(3):
            await collect(gw, f"turn {turn}")
        caller = Caller("alice")
        segment = await gw.sessions.latest("chat:alice", caller)
        (first,) = await gw.sessions.messages("chat:alice", caller, segment.session_id, limit=1)
        await gw.turns.compactor.pins.pin(first, None)
        record = await gw.turns.compactor.compact(segment.session_id, gw.turns.agent(None), 1536)
        assert record is not None and record.first_seq == 1
        _, context = await gw.turns.preview_context("chat:alice", caller)
    finally:
        await gw.aclose()
    sources = [m.source for m in context.messages]
    assert sources.index(f"compaction:{record.compaction_id}") < sources.index(first.message_id)
    assert [m.content for m in context.messages if m.source == first.message_id] == [SECRET]


def test_pin_and_unpin_through_sessiongate_serve(tmp_path: Path) -> None:
    config = relay_model(tmp_path, "relay", context_window=2048)
    config += (
        '[agents.defaults]\nmodel = "relay"\nmemory_window = 4\n'
        "[agents.defaults.context]\ncompact_at = 1.0\n"
    )
    users = {"alice": ("--primary",), "bob": ()}
    with (
        served_gateway(tmp_path, config, users) as served,
        served.client("alice") as alice,
        served.client("bob") as bob,
    ):
        for content in [SECRET, "one", "two", "three"]:
            sent = alice.post(
                "/v1/sessions/c:pins/messages", json={"content": content, "stream": False}
            )
            assert sent.status_code == 200, sent.text
        context = alice.get("/v1/sessions/c:pins/context").json()
        session_id = context["session_id"]
        first = f"{session_id}:1"
        assert first not in [m["source"] for m in context["messages"]]
        assert context["pinned"] == []

        pinned = alice.post(f"/v1/sessions/c:pins/messages/{first}/pin")
        assert pinned.status_code == 200, pinned.text
        assert pinned.json() == {
            "message_id": first,
            "session_id": session_id,
            "seq": 1,
            "pinned": True,
            "changed": True,
        }
        again = alice.post(f"/v1/sessions/c:pins/messages/{first}/pin").json()
        assert again["changed"] is False
        context = alice.get("/v1/sessions/c:pins/context").json()
        assert context["pinned"] == [first]
        shown = {m["source"]: m for m in context["messages"]}
        assert shown[first]["content"] == SECRET and shown[first]["pinned"] is True
        assert not any(m["pinned"] for s, m in shown.items() if s != first)
        # The next turn sends it (the relay answers to the last message; the stored
        # context preview is what the turn sends).
        turn = alice.post("/v1/sessions/c:pins/messages", json={"content": "four", "stream": False})
        assert turn.status_code == 200
        assert first in [
            m["source"] for m in alice.get("/v1/sessions/c:pins/context").json()["messages"]
        ]

        # Another user's message, an unknown one, a malformed id: the same 404.
        for who, key, message in [
            (bob, "c:pins", first),
            (alice, "c:pins", f"{session_id}:999"),
            (alice, "c:pins", "not-a-message"),
            (alice, "c:pins", f"{session_id}:0"),
        ]:
            refused = who.post(f"/v1/sessions/{key}/messages/{message}/pin")
            assert refused.status_code == 404, refused.text
            assert refused.json()["error"]["code"] in {"message_not_found", "session_not_found"}
        bob.post("/v1/sessions/c:pins/messages", json={"content": "mine", "stream": False})
        stranger = bob.post(f"/v1/sessions/c:pins/messages/{first}/pin")
        assert stranger.status_code == 404
        assert stranger.json()["error"]["code"] == "message_not_found"

        # An export carries the pin; its import under another name pins the copy's message.
        exported = alice.get("/v1/sessions/c:pins/export")
        assert exported.status_code == 200
        assert '"type":"pin"' in exported.text
        imported = alice.post("/v1/import", params={"key": "c:pins-copy"}, content=exported.content)
        assert imported.status_code == 201, imported.text
        copy = alice.get("/v1/sessions/c:pins-copy/context").json()
        assert copy["pinned"] == [f"{copy['session_id']}:1"]
        assert SECRET in [m["content"] for m in copy["messages"] if m["pinned"]]

        # Pins that alone would pass the budget (2048 - 512 tokens) are refused.
        big = alice.post(
            "/v1/sessions/c:pins/messages",
            json={"content": "x " * 3500, "stream": False},
        )
        assert big.status_code == 200, big.text
        big_id = f"{session_id}:11"  # after five turns
        listed = alice.get(
            f"/v1/sessions/c:pins/segments/{session_id}/messages", params={"after": 10}
        ).json()["messages"]
        assert listed[0]["content"].startswith("x x x")
        too_much = alice.post(f"/v1/sessions/c:pins/messages/{big_id}/pin")
        assert too_much.status_code == 409, too_much.text
        assert too_much.json()["error"]["code"] == "pins_exceed_budget"

        unpinned = alice.delete(f"/v1/sessions/c:pins/messages/{first}/pin")
        assert unpinned.status_code == 200 and unpinned.json()["changed"] is True
        context = alice.get("/v1/sessions/c:pins/context").json()
        assert context["pinned"] == []
        assert first not in [m["source"] for m in context["messages"]]
