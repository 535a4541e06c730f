"""Compaction records (issue 21, DESIGN.md §12): kept beside the raw messages on both
stores and erased with their key; written after a turn by the summary model, for the
next one, which announces them (`compaction`) and sends the summary in place of what it
covers; a failing summariser loses nothing."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.core.summary_prompt import parse_compact_command
from sessiongate.core.working_set import CompactionRecord
from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, TextDelta, WireMessage
from sessiongate.service.compaction import compaction_store
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import ScriptedModel, collect, types
from tests.support.window_stub import WindowStub

WINDOW = 1024
PARAGRAPH = "The meeting moved to Thursday; bring the quarterly figures and the draft. " * 6


@pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)
async def test_records_are_kept_beside_the_segment_and_erased_with_the_key(
    engine: Engine,
) -> None:
    await collect(engine, "hello", key="c:one")
    segment = await engine.store.latest_segment(KeyRef("alice", "c:one"))
    rows = compaction_store(engine.store)
    assert rows is not None
    record = CompactionRecord(
        compaction_id="cmp-1",
        session_id=segment.session_id,
        first_seq=1,
        last_seq=2,
        count=2,
        summary="they said hello",
        model="scripted",
        tokens_before=40,
        tokens_after=5,
        created_at=datetime(2026, 1, 1, 12, tzinfo=UTC),
        instructions="keep names",
    )
    await rows.add(record)
    assert await rows.for_segment(segment.session_id) == [record]
    assert await rows.set_reverted("cmp-1", True)
    assert not await rows.set_reverted("nope", True)
    (reverted,) = await rows.for_segment(segment.session_id)
    assert reverted.reverted and reverted.summary == "they said hello"
    # The raw messages are untouched.
    messages = await engine.store.list_messages(segment.session_id)
    assert messages[0].content == "hello"
    await engine.sessions.delete("c:one", Caller("alice"))
    assert await rows.for_segment(segment.session_id) == []


def engine_with(tmp_path: Path, url: str, **agent: Any) -> Engine:
    return build_engine(
        Settings(
            data_dir=tmp_path,
            models={
                "m": {
                    "provider": "openai",
                    "model": "stub",
                    "base_url": url + "/v1",
                    "max_retries": 0,
                    "context_window": WINDOW,
                }
            },
            agents={"defaults": {"model": "m", **agent}},
            lifecycle={"timezone": "UTC"},
        )
    )


def summaries(context_messages: Sequence[Any]) -> list[str]:
    return [m.source for m in context_messages if m.source.startswith("compaction:")]


async def test_a_long_conversation_is_compacted_after_turns_and_announced(
    tmp_path: Path,
) -> None:
    async with WindowStub(WINDOW, reply="summary: Thursday, figures, draft") as stub:
        gw = engine_with(tmp_path, stub.url)
        try:
            events: list[Any] = []
            for turn in range(30):
                got = await collect(gw, f"turn {turn}: {PARAGRAPH}")
                assert types(got)[-1] == "end"
                events += got
                await gw.turns.drain()  # the compaction after the turn, for the next one
            segment, context = await gw.turns.preview_context("chat:alice", Caller("alice"))
            rows = compaction_store(gw.store)
            assert rows is not None
            records = await rows.for_segment(segment.session_id)
            messages = await gw.store.list_messages(segment.session_id, limit=1000)
        finally:
            await gw.aclose()
    assert stub.overflows == 0 and max(stub.prompt_tokens) <= WINDOW
    done = [e for e in events if e.type == "compaction"]
    assert done and all(e.status == "done" for e in done)
    # Each is announced by the turn after it (the last one by the next turn to come).
    assert [e.compaction_id for e in done] == [r.compaction_id for r in records[:-1]]
    # Each record folds the one before: coverage grows from the segment's start, and
    # cites only what it (or the one it folds) read.
    for before, after in itertools.pairwise(records):
        assert after.previous_compaction_id == before.compaction_id
        assert after.first_seq == before.first_seq == 1
        assert after.last_seq > before.last_seq
    newest = records[-1]
    assert newest.count == newest.last_seq - newest.first_seq + 1
    # The next turn sees the newest summary, then the raw messages after it.
    assert summaries(context.messages) == [f"compaction:{newest.compaction_id}"]
    raw = [m.source for m in context.messages if m.role != "system"]
    assert raw and all(int(s.rsplit(":", 1)[1]) > newest.last_seq for s in raw)
    # The raw history is untouched: 30 turns, 60 messages.
    assert len(messages) == 60


async def test_a_failing_summariser_loses_nothing_and_the_turn_goes_on(tmp_path: Path) -> None:
    async with WindowStub(WINDOW) as stub:
        gw = engine_with(tmp_path, stub.url, context={"summary_model": "missing"})
        try:
            events: list[Any] = []
            for turn in range(25):
                got = await collect(gw, f"turn {turn}: {PARAGRAPH}")
                assert types(got)[-1] == "end"
                events += got
                await gw.turns.drain()
            segment = await gw.store.latest_segment(KeyRef("alice", "chat:alice"))
            rows = compaction_store(gw.store)
            assert rows is not None
            records = await rows.for_segment(segment.session_id)
        finally:
            await gw.aclose()
    assert records == []
    failed = [e for e in events if e.type == "compaction"]
    assert failed and all(e.status == "failed" for e in failed)
    assert [e for e in events if e.type == "context_trimmed"]
    assert stub.overflows == 0


def scripted_summary(messages: Sequence[Any]) -> str:
    first = str(messages[0]["content"])
    if first.startswith("You compact the earlier part"):
        return "the user planned a meeting on Thursday"
    return f"reply to: {messages[-1]['content']}"


def test_compact_now_list_and_revert_over_rest(tmp_path: Path) -> None:
    settings = gateway_settings(
        tmp_path,
        models={"scripted": {"provider": "offline", "context_window": 4096}},
        agents={
            "defaults": {
                "model": "scripted",
                # Nothing is due on its own here: the compaction is asked for.
                "context": {"keep_recent": 2, "compact_at": 1.0},
            }
        },
    )
    with running_gateway(settings, {"scripted": ScriptedModel(reply=scripted_summary)}) as gw:
        auth = gw.auth("alice")
        with httpx.Client(base_url=gw.url, headers=auth, timeout=30) as http:
            for turn in range(4):
                sent = http.post(
                    "/v1/sessions/c:rest/messages",
                    json={"content": f"turn {turn}: the meeting", "stream": False},
                )
                assert sent.status_code == 200, sent.text
            made = http.post("/v1/sessions/c:rest/compact", json={"instructions": "keep dates"})
            assert made.status_code == 200, made.text
            record = made.json()["compaction"]
            assert record["covers"] == {"first_seq": 1, "last_seq": 6, "count": 6}
            assert record["instructions"] == "keep dates"
            assert record["summary"] == "the user planned a meeting on Thursday"
            listed = http.get("/v1/sessions/c:rest/compactions").json()
            assert listed["in_force"] == record["compaction_id"]
            context = http.get("/v1/sessions/c:rest/context").json()
            sources = [m["source"] for m in context["messages"]]
            assert f"compaction:{record['compaction_id']}" in sources
            assert [s for s in sources if ":" in s and not s.startswith("compaction")] == [
                s for s in sources[-2:]
            ]
            # The next turn announces the compaction made on request.
            streamed = http.post(
                "/v1/sessions/c:rest/messages", json={"content": "and now?", "stream": False}
            ).json()
            assert [c["compaction_id"] for c in streamed["compaction"]] == [record["compaction_id"]]
            gone = http.post("/v1/sessions/c:rest/compactions/nope/revert")
            assert gone.status_code == 404
            assert gone.json()["error"]["code"] == "compaction_not_found"
            undone = http.post(f"/v1/sessions/c:rest/compactions/{record['compaction_id']}/revert")
            assert undone.status_code == 200 and undone.json()["compaction"]["reverted"]
            context = http.get("/v1/sessions/c:rest/context").json()
            assert not [m for m in context["messages"] if m["source"].startswith("compaction:")]
            assert http.get("/v1/sessions/c:rest/compactions").json()["in_force"] is None
            # Another user never reaches the key.
            other = http.get("/v1/sessions/c:rest/compactions", headers=gw.auth("bob"))
            assert other.status_code == 404


async def test_a_conversation_that_never_needs_compaction_reads_no_records(
    tmp_path: Path,
) -> None:
    async with WindowStub(WINDOW) as stub:
        gw = engine_with(tmp_path, stub.url)
        rows = gw.turns.compactor.rows
        assert rows is not None
        reads: list[str] = []
        original = rows.for_segment

        async def counted(session_id: str) -> list[CompactionRecord]:
            reads.append(session_id)
            return await original(session_id)

        rows.for_segment = counted  # type: ignore[method-assign]
        try:
            for turn in range(6):
                assert types(await collect(gw, f"short {turn}", key="c:short"))[-1] == "end"
            assert reads == []  # the common path: no extra round trip
            for turn in range(20):
                got = await collect(gw, f"turn {turn}: {PARAGRAPH}", key="c:long")
                assert types(got)[-1] == "end"
                await gw.turns.drain()
        finally:
            await gw.aclose()
    assert len(reads) == 1  # the long thread's records: read once, then kept current


def test_compact_command_parsing() -> None:
    assert parse_compact_command("/compact") == ""
    assert parse_compact_command("  /compact keep the dates \n") == "keep the dates"
    assert parse_compact_command("/compacted") is None
    assert parse_compact_command("please /compact") is None


async def test_compact_as_a_message_compacts_now_and_stores_nothing_of_itself(
    tmp_path: Path,
) -> None:
    async with WindowStub(WINDOW, reply="a short summary") as stub:
        gw = engine_with(tmp_path, stub.url, context={"keep_recent": 2, "compact_at": 1.0})
        try:
            for turn in range(4):
                assert types(await collect(gw, f"turn {turn}"))[-1] == "end"
            events = await collect(gw, "/compact keep the dates")
            segment = await gw.store.latest_segment(KeyRef("alice", "chat:alice"))
            messages = await gw.store.list_messages(segment.session_id)
            rows = compaction_store(gw.store)
            assert rows is not None
            (record,) = await rows.for_segment(segment.session_id)
            again = await collect(gw, "/compact")
        finally:
            await gw.aclose()
    assert types(events) == ["start", "compaction", "end"]
    assert events[1].status == "done" and events[1].compaction_id == record.compaction_id
    assert events[1].covers == {"first_seq": 1, "last_seq": 6, "count": 6}
    assert events[-1].message_id is None
    assert record.instructions == "keep the dates" and record.summary == "a short summary"
    assert len(messages) == 8  # the command itself is not a message
    assert [e.status for e in again if e.type == "compaction"] == ["nothing_to_compact"]


async def test_compact_on_an_agent_without_a_window_says_unavailable(engine: Engine) -> None:
    events = await collect(engine, "/compact")
    assert [e.status for e in events if e.type == "compaction"] == ["unavailable"]


def test_the_openai_route_names_the_compaction_in_a_header(tmp_path: Path) -> None:
    settings = gateway_settings(
        tmp_path,
        models={"scripted": {"provider": "offline", "context_window": 4096}},
        agents={
            "defaults": {"model": "scripted", "context": {"keep_recent": 2, "compact_at": 1.0}}
        },
    )
    model = ScriptedModel(reply=scripted_summary)
    with (
        running_gateway(settings, {"scripted": model}) as gw,
        httpx.Client(base_url=gw.url, headers=gw.auth("alice"), timeout=30) as http,
    ):
        history: list[dict[str, str]] = []
        headers = {"X-Session-Key": "oa:k"}
        for turn in range(4):
            history.append({"role": "user", "content": f"turn {turn}"})
            answer = http.post(
                "/v1/chat/completions",
                headers=headers,
                json={"model": "main", "messages": history},
            )
            assert answer.status_code == 200, answer.text
            assert "X-Context-Compacted" not in answer.headers
            history.append(answer.json()["choices"][0]["message"])
        made = http.post("/v1/sessions/oa:k/compact", json={}).json()["compaction"]
        history.append({"role": "user", "content": "and then?"})
        answer = http.post(
            "/v1/chat/completions", headers=headers, json={"model": "main", "messages": history}
        )
    assert answer.status_code == 200, answer.text
    assert answer.headers["X-Context-Compacted"] == made["compaction_id"]


async def test_erasing_a_key_leaves_none_of_its_summaries_in_memory(tmp_path: Path) -> None:
    async with WindowStub(WINDOW, reply="a summary") as stub:
        gw = engine_with(tmp_path, stub.url, context={"keep_recent": 2, "compact_at": 1.0})
        try:
            for turn in range(4):
                await collect(gw, f"turn {turn}", key="c:gone")
            await collect(gw, "/compact", key="c:gone")
            segment = await gw.store.latest_segment(KeyRef("alice", "c:gone"))
            assert gw.turns.compactor.cached(segment.session_id)
            await gw.sessions.delete("c:gone", Caller("alice"))
            assert gw.turns.compactor.cached(segment.session_id) == ()
            rows = compaction_store(gw.store)
            assert rows is not None and await rows.for_segment(segment.session_id) == []
        finally:
            await gw.aclose()


class SlowSummaries:
    """Replies at once; a summary waits until `release` is set."""

    name = "m"

    def __init__(self) -> None:
        self.release = asyncio.Event()

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        if str(messages[0]["content"]).startswith("You compact the earlier part"):
            await self.release.wait()
            yield TextDelta("a short summary")
        else:
            yield TextDelta("ok")


async def test_a_turn_that_would_trim_waits_for_the_running_compaction_and_says_so(
    tmp_path: Path,
) -> None:
    model = SlowSummaries()
    gw = build_engine(
        Settings(
            data_dir=tmp_path,
            models={"m": {"provider": "offline", "context_window": WINDOW}},
            agents={"defaults": {"model": "m", "context": {"keep_recent": 2}}},
            lifecycle={"timezone": "UTC"},
        ),
        models={"m": model},
    )
    statuses: list[str] = []
    try:
        segment_id = None
        for turn in range(12):
            if segment_id and gw.turns.compactor.running(segment_id):
                asyncio.get_running_loop().call_later(0.3, model.release.set)
            events = await collect(gw, f"turn {turn}: {PARAGRAPH}")
            assert types(events)[-1] == "end"
            segment_id = events[0].session_id
            statuses += [e.status for e in events if e.type == "compaction"]
    finally:
        model.release.set()
        await gw.aclose()
    assert "waited" in statuses


async def test_compactions_never_end_inside_a_tool_step(tmp_path: Path) -> None:
    # Tool steps stored in the thread (as an agent with tools leaves them): every record
    # ends on a unit's last message, and no request holds a result without its call.
    async with WindowStub(WINDOW, reply="a summary") as stub:
        gw = engine_with(tmp_path, stub.url, context={"keep_recent": 3})
        ref = KeyRef("alice", "chat:alice")
        try:
            for turn in range(16):
                assert types(await collect(gw, f"turn {turn}: {PARAGRAPH[:200]}"))[-1] == "end"
                segment = await gw.store.latest_segment(ref)
                now = gw.sessions.clock.now()
                ids = [f"call-{turn}-{k}" for k in range(2)]
                calls = [{"id": i, "name": "lookup", "arguments": "{}"} for i in ids]
                await gw.sessions.append_message(
                    ref,
                    segment.session_id,
                    role=Role.ASSISTANT,
                    content="",
                    now=now,
                    metadata={"tool_calls": calls},
                )
                for call_id in ids:
                    await gw.sessions.append_message(
                        ref,
                        segment.session_id,
                        role=Role.TOOL,
                        content="r" * 300,
                        now=now,
                        metadata={"tool_call_id": call_id},
                    )
                await gw.turns.drain()
            segment = await gw.store.latest_segment(ref)
            messages = await gw.store.list_messages(segment.session_id, limit=1000)
            rows = compaction_store(gw.store)
            assert rows is not None
            records = await rows.for_segment(segment.session_id)
        finally:
            await gw.aclose()
    assert records
    role_of = {m.seq: m.role for m in messages}
    for record in records:
        assert role_of.get(record.last_seq + 1) is not Role.TOOL  # a step is never cut
    for request in stub.requests:
        pending: set[str] = set()
        for message in (request.body or {}).get("messages", []):
            if message["role"] == "tool":
                assert message["tool_call_id"] in pending
            else:
                pending = {c["id"] for c in message.get("tool_calls") or []}
    assert stub.overflows == 0
