"""Compaction records another process wrote (issue 21, DESIGN.md §12): a gateway keeps
each segment's records in memory, and on the paths that read them anyway (a thread past
`compact_at` or the window, a compaction about to be planned) asks the database in one
small query whether another gateway added or reverted one since. So a segment compacted
by one gateway is not summarised again by the other, and its summary is what the other
sends. Two engines on one database (SQLite and PostgreSQL), and two `sessiongate serve`
processes on one PostgreSQL database."""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.working_set import CompactionRecord, in_force
from sessiongate.service.compaction import compaction_store
from sessiongate.service.engine import Engine, build_engine
from tests.conftest import START
from tests.support.helpers import ScriptedModel, collect, types
from tests.support.served import relay_model
from tests.support.served_cluster import served_cluster

KEY = "c:shared"
counter = itertools.count(1)


def reply(messages: Any) -> str:
    if str(messages[0]["content"]).startswith("You compact the earlier part"):
        return f"summary number {next(counter)}"
    return f"reply to: {messages[-1]['content']}"


def gateway(tmp_path: Path, database_url: str, model: ScriptedModel) -> Engine:
    return build_engine(
        Settings(
            data_dir=tmp_path,
            database={"url": database_url, "pool_size": 4},
            lifecycle={"timezone": "UTC"},
            models={"scripted": {"provider": "offline", "context_window": 4096}},
            agents={
                "defaults": {"model": "scripted", "memory_window": 4, "context": {"keep_recent": 2}}
            },
        ),
        clock=ManualClock(START),
        models={"scripted": model},
    )


def assert_one_chain(records: Sequence[CompactionRecord]) -> None:
    """Each record folds the one before it: no span summarised twice, no second root."""
    folded = [r.previous_compaction_id for r in records]
    assert len(set(folded)) == len(folded), [
        (r.compaction_id, r.previous_compaction_id) for r in records
    ]


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_a_compaction_by_one_gateway_is_not_made_again_by_the_other(
    tmp_path: Path, database_url: str
) -> None:
    model_a, model_b = ScriptedModel(reply=reply), ScriptedModel(reply=reply)
    a, b = gateway(tmp_path, database_url, model_a), gateway(tmp_path, database_url, model_b)
    await a.start()
    await b.start()
    try:
        rows = compaction_store(a.store)
        assert rows is not None
        for turn in range(3):  # A reads the segment's records and compacts it
            await collect(a, f"a{turn}", key=KEY)
            await a.turns.drain()
        segment = await a.store.latest_segment(KeyRef("alice", KEY))
        assert len(await rows.for_segment(segment.session_id)) == 1
        for turn in range(10):  # B compacts it further, folding A's record
            await collect(b, f"b{turn}", key=KEY)
            await b.turns.drain()
            if len(await rows.for_segment(segment.session_id)) >= 2:
                break
        newest = in_force(await rows.for_segment(segment.session_id))
        assert newest is not None and newest.previous_compaction_id is not None
        # A still holds only its own record in memory: it asks, and sends B's summary.
        assert len(a.turns.compactor.cached(segment.session_id)) == 1
        events = await collect(a, "and now?", key=KEY)
        await a.turns.drain()
        sent = next(r for r in model_a.requests if r[-1]["content"] == "and now?")
        assert any(newest.summary in m["content"] for m in sent if m["role"] == "system")
        assert "context_trimmed" not in types(events)
        assert_one_chain(await rows.for_segment(segment.session_id))
    finally:
        await a.aclose()
        await b.aclose()


def _records(http: httpx.Client) -> list[dict[str, Any]]:
    listed = http.get(f"/v1/sessions/{KEY}/compactions")
    assert listed.status_code == 200, listed.text
    return list(listed.json()["compactions"])


def _turn(http: httpx.Client, text: str) -> dict[str, Any]:
    answer = http.post(f"/v1/sessions/{KEY}/messages", json={"content": text, "stream": False})
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def _settle(http: httpx.Client, more_than: int, within: float = 8.0) -> int:
    """Wait (bounded) for the background compaction after a turn; how many records."""
    deadline = time.monotonic() + within
    while (found := len(_records(http))) <= more_than and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def test_two_served_gateways_share_their_compactions(tmp_path: Path) -> None:
    config = relay_model(tmp_path, "relay").replace(
        'provider = "command"', 'provider = "command"\ncontext_window = 4096'
    )
    config += (
        '[agents.defaults]\nmodel = "relay"\nmemory_window = 4\n'
        "[agents.defaults.context]\nkeep_recent = 2\n"
    )
    with (
        served_cluster(tmp_path, config, {"alice": ()}) as gateways,
        gateways[0].client("alice") as a,
        gateways[1].client("alice") as b,
    ):
        for turn in range(3):
            _turn(a, f"first gateway {turn}")
        assert _settle(a, 0) == 1
        found = 1
        for turn in range(10):  # the second gateway folds the first one's record
            _turn(b, f"second gateway {turn}")
            found = _settle(b, found, within=3.0)
            if found >= 2:
                break
        assert found >= 2
        # The first gateway holds only its own record: it asks, and neither trims
        # nor summarises again what the second one did.
        answered = _turn(a, "first gateway again")
        assert "context_trimmed" not in answered
        time.sleep(2.0)  # room for a (wrong) compaction after that turn
        records = _records(a)
        folded = [r["previous_compaction_id"] for r in records]
        assert len(set(folded)) == len(folded), records
        context = a.get(f"/v1/sessions/{KEY}/context").json()
        newest = records[-1]["compaction_id"]
        # (the summary is sent though the window holds nothing it covers)
        assert f"compaction:{newest}" in [m["source"] for m in context["messages"]], (
            records,
            context,
        )
