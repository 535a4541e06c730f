"""Concurrent turns: one key is serialised in arrival order, different keys never wait on
each other, and the per-key locks leave nothing behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, Role
from sessiongate.models.base import ReplyModel
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.turn.pipeline import InboundTurn, TurnHandle
from tests.conftest import ALICE, make_settings
from tests.support.helpers import ScriptedModel, collect

TIMEOUT = 30


@pytest.fixture
def gate() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture
def started() -> asyncio.Event:
    return asyncio.Event()


@pytest.fixture
async def engine(
    tmp_path: Path, clock: ManualClock, gate: asyncio.Event, started: asyncio.Event
) -> AsyncIterator[Engine]:
    """`scripted` replies at once (yielding to the loop between tokens); `gated` sends its
    first token, sets `started`, then waits for `gate`."""
    models: dict[str, ReplyModel] = {
        "scripted": ScriptedModel(),
        "gated": ScriptedModel("gated", gate=gate, started=started),
    }
    # `models` lets a key's override pick the gated one (core/agent_access.py).
    agents: dict[str, object] = {"defaults": {"model": "scripted", "models": ["gated"]}}
    built = build_engine(make_settings(tmp_path, agents), clock=clock, models=models)
    yield built
    await built.aclose()


async def all_messages(engine: Engine, key: str) -> list[Message]:
    out: list[Message] = []
    for segment in await engine.store.chain(KeyRef("alice", key)):
        out.extend(await engine.store.list_messages(segment.session_id, limit=1000))
    return out


async def gated_key(engine: Engine, key: str) -> None:
    """Create `key` with the gated model as its reply model."""
    await engine.sessions.open_key(KeyRef("alice", key))
    await engine.sessions.set_overrides(key, ALICE, {"reply_model": "gated"})


def start(engine: Engine, key: str, content: str) -> TurnHandle:
    return engine.turns.start_turn(InboundTurn(key=key, caller=ALICE, content=content))


async def test_hundred_concurrent_turns_on_one_key(engine: Engine) -> None:
    key = "chat:alice"
    contents = [f"msg-{i}" for i in range(100)]
    async with asyncio.timeout(TIMEOUT):
        results = await asyncio.gather(*(collect(engine, c, key=key) for c in contents))

    chain = await engine.store.chain(KeyRef("alice", key))
    assert len(chain) == 1  # nothing here may rotate
    messages = await all_messages(engine, key)
    assert len(messages) == 200
    assert [m.seq for m in messages] == list(range(1, 201))
    users, replies = messages[0::2], messages[1::2]
    assert all(m.role is Role.USER for m in users)
    assert all(m.role is Role.ASSISTANT for m in replies)
    assert sorted(m.content for m in users) == sorted(contents)  # none lost, none doubled
    # Each reply immediately follows its own user message: turns never interleave.
    for user, reply in zip(users, replies, strict=True):
        assert reply.content == f"reply to: {user.content}"
        assert reply.metadata["turn_id"] == user.metadata["turn_id"]
    # Serialised in arrival order.
    assert [m.content for m in users] == contents
    # Every turn's `end` event points at its own reply.
    by_id = {m.message_id: m for m in messages}
    for content, events in zip(contents, results, strict=True):
        assert [e.type for e in events][-1] == "end", events
        end = events[-1]
        reply = by_id[end.message_id]
        assert reply.content == f"reply to: {content}"
        assert end.message_count == reply.seq  # the segment's size when this turn ended
        assert messages[reply.seq - 2].content == content  # its own user message before it
    assert len(engine.sessions.locks) == 0


async def test_turns_on_different_keys_do_not_wait_for_each_other(
    engine: Engine, gate: asyncio.Event, started: asyncio.Event
) -> None:
    await gated_key(engine, "chat:a")
    async with asyncio.timeout(TIMEOUT):
        slow = start(engine, "chat:a", "slow question")
        await started.wait()  # A has sent its first token and is now blocked on the gate
        queued = start(engine, "chat:a", "queued behind the slow one")
        await asyncio.sleep(0.05)

        # B runs to its end while A is still blocked.
        events = await asyncio.wait_for(collect(engine, "quick question", key="chat:b"), 5)
        assert events[-1].type == "end"
        assert [m.content for m in await all_messages(engine, "chat:b")] == [
            "quick question",
            "reply to: quick question",
        ]

        # A is still waiting: its user message is committed, its reply is not, and the
        # second turn on A has not even started (one key, one turn at a time).
        assert slow.task is not None and not slow.task.done()
        assert queued.task is not None and not queued.task.done()
        assert [m.content for m in await all_messages(engine, "chat:a")] == ["slow question"]
        assert len(engine.sessions.locks) == 1  # only A's entry; B's is gone

        gate.set()
        await slow.wait()
        await queued.wait()

    assert (slow.status, queued.status) == ("complete", "complete")
    assert [m.content for m in await all_messages(engine, "chat:a")] == [
        "slow question",
        "reply to: slow question",
        "queued behind the slow one",
        "reply to: queued behind the slow one",
    ]
    assert len(engine.sessions.locks) == 0


async def test_a_cancelled_waiter_leaves_no_lock_entry(
    engine: Engine, gate: asyncio.Event, started: asyncio.Event
) -> None:
    await gated_key(engine, "chat:a")
    async with asyncio.timeout(TIMEOUT):
        holder = start(engine, "chat:a", "holding the lock")
        await started.wait()
        waiter = start(engine, "chat:a", "never runs")
        await asyncio.sleep(0.05)
        waiter.cancel()
        await waiter.wait()
        events = [e async for e in waiter.events()]
        assert events[-1].type == "error" and events[-1].code == "turn_cancelled"
        assert len(engine.sessions.locks) == 1  # the holder's entry only
        gate.set()
        await holder.wait()
    assert holder.status == "complete"
    assert [m.content for m in await all_messages(engine, "chat:a")] == [
        "holding the lock",
        "reply to: holding the lock",
    ]
    assert len(engine.sessions.locks) == 0


async def test_many_keys_many_turns_at_once(engine: Engine) -> None:
    keys = [f"chat:k{k}" for k in range(20)]
    turns = [(key, f"{key} turn {t}") for t in range(5) for key in keys]
    async with asyncio.timeout(TIMEOUT):
        results = await asyncio.gather(*(collect(engine, c, key=k) for k, c in turns))
    assert all(events[-1].type == "end" for events in results)
    for key in keys:
        contents = [m.content for m in await all_messages(engine, key)]
        expected: list[str] = []
        for t in range(5):
            expected += [f"{key} turn {t}", f"reply to: {key} turn {t}"]
        assert contents == expected
    assert len(engine.sessions.locks) == 0
