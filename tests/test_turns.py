"""The turn service: what is kept when models fail, streams are cut or clients leave."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from pathlib import Path

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.errors import ModelError
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.turn.pipeline import InboundTurn
from tests.conftest import ALICE, make_settings
from tests.support.helpers import ScriptedModel, collect, types

KEY = "chat:alice"
REF = KeyRef("alice", KEY)


async def messages(engine: Engine) -> list[tuple[str, str, str]]:
    latest = await engine.store.latest_segment(REF)
    return [
        (m.role.value, m.content, m.status.value)
        for m in await engine.store.list_messages(latest.session_id)
    ]


async def test_a_turn_streams_tokens_and_commits_both_messages(engine: Engine) -> None:
    events = await collect(engine, "hello world")
    assert types(events)[0] == "start" and types(events)[-1] == "end"
    tokens = "".join(e.content for e in events if e.type == "token")
    assert tokens == "reply to: hello world"
    end = events[-1]
    assert end.message_count == 2 and end.usage["completion_tokens"] == 4
    assert await messages(engine) == [
        ("user", "hello world", "complete"),
        ("assistant", "reply to: hello world", "complete"),
    ]


def failing_engine(
    tmp_path: Path, clock: ManualClock, *models: ScriptedModel, fallbacks: list[str] | None = None
) -> Engine:
    settings = make_settings(
        tmp_path, agents={"defaults": {"model": models[0].name, "fallback_models": fallbacks or []}}
    )
    return build_engine(settings, clock=clock, models={m.name: m for m in models})


async def test_model_failure_keeps_user_message_and_appends_no_reply(
    tmp_path: Path, clock: ManualClock
) -> None:
    broken = ScriptedModel("broken", fail=ModelError("upstream 500", code="model_unavailable"))
    engine = failing_engine(tmp_path, clock, broken)
    try:
        events = await collect(engine, "are you there?")
        assert types(events) == ["start", "error"]
        assert events[-1].code == "model_unavailable"
        assert await messages(engine) == [("user", "are you there?", "complete")]
    finally:
        await engine.aclose()


async def test_fallback_model_answers_when_the_first_fails(
    tmp_path: Path, clock: ManualClock
) -> None:
    broken = ScriptedModel("broken", fail=ModelError("429", retryable=True))
    backup = ScriptedModel("backup", lambda m: "backup here")
    engine = failing_engine(tmp_path, clock, broken, backup, fallbacks=["backup"])
    try:
        events = await collect(engine, "hi")
        assert types(events)[-1] == "end"
        assert await messages(engine) == [
            ("user", "hi", "complete"),
            ("assistant", "backup here", "complete"),
        ]
        latest = await engine.store.latest_segment(REF)
        reply = (await engine.store.list_messages(latest.session_id))[-1]
        assert reply.metadata["model"] == "backup"
    finally:
        await engine.aclose()


async def test_failure_mid_stream_does_not_switch_model_and_keeps_partial_as_interrupted(
    tmp_path: Path, clock: ManualClock
) -> None:
    flaky = ScriptedModel(
        "flaky",
        lambda m: "one two three four",
        fail=ModelError("connection dropped"),
        fail_after_tokens=2,
    )
    backup = ScriptedModel("backup")
    engine = failing_engine(tmp_path, clock, flaky, backup, fallbacks=["backup"])
    try:
        events = await collect(engine, "hi")
        assert types(events) == ["start", "token", "token", "error"]
        assert backup.requests == []
        # What the client already saw is kept, marked: never silently dropped, never
        # passed off as a complete answer.
        assert await messages(engine) == [
            ("user", "hi", "complete"),
            ("assistant", "one two", "interrupted"),
        ]
    finally:
        await engine.aclose()


async def test_cancelled_turn_keeps_partial_reply_as_interrupted(
    tmp_path: Path, clock: ManualClock
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    slow = ScriptedModel(
        "slow", lambda m: "partial answer that never ends", gate=gate, started=started
    )
    engine = failing_engine(tmp_path, clock, slow)
    try:
        handle = engine.turns.start_turn(InboundTurn(KEY, ALICE, "tell me a story"))
        await asyncio.wait_for(started.wait(), 5)
        handle.cancel()
        await handle.wait()
        seen = [e.type async for e in handle.events()]
        assert seen[-1] == "error"
        assert await messages(engine) == [
            ("user", "tell me a story", "complete"),
            ("assistant", "partial", "interrupted"),
        ]
        assert len(engine.sessions.locks) == 0
    finally:
        await engine.aclose()


async def test_client_that_stops_listening_loses_nothing(
    tmp_path: Path, clock: ManualClock
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    slow = ScriptedModel("slow", lambda m: "the whole answer", gate=gate, started=started)
    engine = failing_engine(tmp_path, clock, slow)
    try:
        stream = engine.turns.run_turn(InboundTurn(KEY, ALICE, "question"))
        assert isinstance(stream, AsyncGenerator)  # `run_turn` is an async generator
        first = await anext(stream)
        assert first.type == "start"
        await stream.aclose()  # the client goes away mid-stream
        gate.set()
        await asyncio.wait_for(engine.turns.drain(), 5)
        assert await messages(engine) == [
            ("user", "question", "complete"),
            ("assistant", "the whole answer", "complete"),
        ]
    finally:
        await engine.aclose()


async def test_bare_new_ends_without_calling_the_model(
    engine: Engine, scripted: ScriptedModel
) -> None:
    await collect(engine, "hello")
    calls = len(scripted.requests)
    events = await collect(engine, "/new")
    assert types(events) == ["start", "rotation", "end"]
    assert events[-1].message_id is None and events[-1].message_count == 0
    assert len(scripted.requests) == calls


async def test_shutdown_cancels_running_turns_and_keeps_partials(
    tmp_path: Path, clock: ManualClock
) -> None:
    gate, started = asyncio.Event(), asyncio.Event()
    slow = ScriptedModel("slow", lambda m: "halfway there", gate=gate, started=started)
    engine = failing_engine(tmp_path, clock, slow)
    engine.turns.start_turn(InboundTurn(KEY, ALICE, "go"))
    await asyncio.wait_for(started.wait(), 5)
    await engine.turns.aclose()
    latest = await engine.store.latest_segment(REF)
    stored = await engine.store.list_messages(latest.session_id)
    await engine.store.close()
    assert [(m.role, m.status) for m in stored] == [
        (Role.USER, MessageStatus.COMPLETE),
        (Role.ASSISTANT, MessageStatus.INTERRUPTED),
    ]


async def test_context_respects_memory_window_and_system_prompt(
    tmp_path: Path, clock: ManualClock
) -> None:
    model = ScriptedModel("m")
    settings = make_settings(
        tmp_path,
        agents={
            "defaults": {"model": "m", "memory_window": 3},
            "main": {"system_prompt": "Be brief."},
        },
    )
    engine = build_engine(settings, clock=clock, models={"m": model})
    try:
        for i in range(4):
            await collect(engine, f"message {i}")
        sent = model.requests[-1]
        assert sent[0] == {"role": "system", "content": "Be brief."}
        assert [m["content"] for m in sent[1:]] == ["message 2", "reply to: message 2", "message 3"]
    finally:
        await engine.aclose()


async def test_context_files_are_injected_as_system_context(
    tmp_path: Path, clock: ManualClock
) -> None:
    (tmp_path / "CLAUDE.md").write_text("Project rules: use tabs.", encoding="utf-8")
    model = ScriptedModel("m")
    settings = make_settings(
        tmp_path,
        agents={"defaults": {"model": "m", "context_files": [str(tmp_path / "CLAUDE.md")]}},
    )
    engine = build_engine(settings, clock=clock, models={"m": model})
    try:
        await collect(engine, "hello")
        assert {"role": "system", "content": "Project rules: use tabs."} in model.requests[-1]
    finally:
        await engine.aclose()
