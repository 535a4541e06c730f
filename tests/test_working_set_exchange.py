"""Export and import carry the working set's compaction records and pins (issue 21): a
round trip on both stores gives them back as they were, an import beside the original
gets fresh compaction ids (folds kept), a file whose records point past its messages is
refused naming the line, and erasing a user erases them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.working_set import in_force
from sessiongate.errors import ImportFormatError
from sessiongate.service.compaction import compaction_store
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.pins import pin_store
from sessiongate.service.sessions import Caller
from sessiongate.service.user_erasure import OPERATOR, user_erasure
from tests.conftest import START
from tests.support.helpers import ScriptedModel, collect

ALICE = Caller("alice")


def summarise(messages: Any) -> str:
    if str(messages[0]["content"]).startswith("You compact the earlier part"):
        return "they talked about the launch"
    return f"reply to: {messages[-1]['content']}"


@pytest.fixture
async def gw(tmp_path: Path, database_url: str) -> AsyncIterator[Engine]:
    built = build_engine(
        Settings(
            data_dir=tmp_path,
            database={"url": database_url, "pool_size": 4},
            lifecycle={"timezone": "UTC"},
            models={"scripted": {"provider": "offline", "context_window": 4096}},
            agents={
                "defaults": {"model": "scripted", "context": {"keep_recent": 2, "compact_at": 1.0}}
            },
        ),
        clock=ManualClock(START),
        models={"scripted": ScriptedModel(reply=summarise)},
    )
    await built.start()
    await built.users.add("alice", primary=True)
    yield built
    await built.aclose()


async def working_set(gw: Engine, key: str) -> tuple[list[Any], dict[int, Any], str]:
    segment = await gw.sessions.latest(key, ALICE)
    records, pins = compaction_store(gw.store), pin_store(gw.store)
    assert records is not None and pins is not None
    return (
        await records.for_segment(segment.session_id),
        await pins.pin_times(segment.session_id),
        segment.session_id,
    )


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_export_and_import_carry_compactions_and_pins(gw: Engine) -> None:
    for turn in range(4):
        await collect(gw, f"launch note {turn}", key="c:ws")
    segment = await gw.sessions.latest("c:ws", ALICE)
    agent = gw.turns.agent(None)
    first = await gw.turns.compactor.compact(segment.session_id, agent, 3000)
    await collect(gw, "one more", key="c:ws")
    await collect(gw, "and another", key="c:ws")
    second = await gw.turns.compactor.compact(segment.session_id, agent, 3000)
    assert first is not None and second is not None
    assert second.previous_compaction_id == first.compaction_id
    await gw.turns.compactor.revert(segment.session_id, second.compaction_id)
    (message,) = await gw.sessions.messages("c:ws", ALICE, segment.session_id, limit=1)
    await gw.turns.compactor.pins.pin(message, None)
    before = await working_set(gw, "c:ws")

    lines = await gw.sessions.export("c:ws", ALICE)
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[-3:] == ["compaction", "compaction", "pin"]

    # Beside the original: the same records under fresh ids, the fold kept.
    await gw.sessions.import_chain(lines, ALICE, key="c:copy")
    copied, copied_pins, copy_session = await working_set(gw, "c:copy")
    assert copy_session != segment.session_id
    assert [(c.summary, c.first_seq, c.last_seq, c.reverted) for c in copied] == [
        (c.summary, c.first_seq, c.last_seq, c.reverted) for c in before[0]
    ]
    assert {c.compaction_id for c in copied}.isdisjoint(c.compaction_id for c in before[0])
    assert copied[1].previous_compaction_id == copied[0].compaction_id
    assert copied_pins == before[1]
    # The copy's working set uses them: the newest was reverted, the first is in force.
    gw.turns.compactor._records.clear()
    assert in_force(await gw.turns.compactor.records(copy_session)) == copied[0]
    assert [m.seq for m in await gw.turns.compactor.pins.pinned(copy_session)] == [1]

    # Erased with the key, and a round trip into the freed ids changes nothing.
    await gw.sessions.delete("c:ws", ALICE)
    assert await working_set_rows(gw, segment.session_id) == ([], {})
    await gw.sessions.import_chain(lines, ALICE)
    assert await working_set(gw, "c:ws") == before
    assert await gw.sessions.export("c:ws", ALICE) == lines

    # Erasing the user erases them all.
    await user_erasure(gw).erase("alice", by=OPERATOR)
    assert await working_set_rows(gw, segment.session_id) == ([], {})
    assert await working_set_rows(gw, copy_session) == ([], {})


async def working_set_rows(gw: Engine, session_id: str) -> tuple[list[Any], dict[int, Any]]:
    records, pins = compaction_store(gw.store), pin_store(gw.store)
    assert records is not None and pins is not None
    return await records.for_segment(session_id), await pins.pin_times(session_id)


async def test_records_past_the_messages_are_refused_naming_the_line(gw: Engine) -> None:
    await collect(gw, "hello", key="c:bad")
    lines = await gw.sessions.export("c:bad", ALICE)
    session_id = json.loads(lines[1])["session_id"]
    pin = {"type": "pin", "session_id": session_id, "seq": 3, "created_at": "2026-01-01T00:00:00Z"}
    with pytest.raises(ImportFormatError) as refused:
        await gw.sessions.import_chain([*lines, json.dumps(pin)], ALICE, key="c:bad2")
    assert refused.value.line == len(lines) + 1
    assert "past its segment's last" in refused.value.message
    compaction = {
        "type": "compaction",
        "compaction_id": "c1",
        "session_id": "0190c0de-0000-7000-8000-000000000000",
        "first_seq": 1,
        "last_seq": 2,
        "count": 2,
        "summary": "s",
        "model": "m",
        "tokens_before": 1,
        "tokens_after": 1,
        "created_at": "2026-01-01T00:00:00Z",
        "previous_compaction_id": None,
        "instructions": None,
        "reverted": False,
    }
    with pytest.raises(ImportFormatError) as unknown:
        await gw.sessions.import_chain([*lines, json.dumps(compaction)], ALICE, key="c:bad3")
    assert "unknown segment" in unknown.value.message
