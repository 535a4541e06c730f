"""The validation cases A1-F2 of the lifecycle contract (SOURCES.md, seed 003)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import timedelta
from pathlib import Path

import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.control import BUILTIN_JUDGE, ControlSource, resolve_control_chain
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RotationReason, SegmentStatus
from sessiongate.errors import ImmutableSegment
from sessiongate.models.base import WireMessage
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.turn.pipeline import RecallRequest
from sessiongate.store.sqlite.store import SQLiteStore
from tests.conftest import ALICE, make_settings
from tests.support.helpers import ScriptedModel, collect, types

KEY = "chat:alice"
REF = KeyRef("alice", KEY)


async def chain_ids(engine: Engine, key: str = KEY) -> list[str]:
    return [s.session_id for s in await engine.store.chain(KeyRef("alice", key))]


# -- A. /new ------------------------------------------------------------------


async def test_session_new_hard_cut_creates_segment(engine: Engine) -> None:
    await collect(engine, "hello there")
    s1 = (await engine.store.latest_segment(REF)).session_id
    events = await collect(engine, "/new")
    assert types(events) == ["start", "rotation", "end"]
    rotation = events[1]
    assert (rotation.from_session_id, rotation.reason) == (s1, "manual")
    latest = await engine.store.latest_segment(REF)
    assert latest.session_id == rotation.to_session_id != s1
    old = await engine.store.get_segment(s1)
    assert old is not None and old.status is SegmentStatus.ARCHIVED
    assert old.archived_at is not None and old.message_count == 2
    assert latest.parent_ids == (s1,) and latest.message_count == 0


async def test_session_new_repeated_chain_integrity(engine: Engine) -> None:
    await collect(engine, "first topic")
    await collect(engine, "/new")
    await collect(engine, "/new")
    chain = await engine.store.chain(REF)
    assert len(chain) == 3
    s1, s2, s3 = chain
    assert s2.parent_ids == (s1.session_id,) and s3.parent_ids == (s2.session_id,)
    assert [s.status for s in chain] == [
        SegmentStatus.ARCHIVED,
        SegmentStatus.ARCHIVED,
        SegmentStatus.LATEST,
    ]
    assert (await engine.store.get_key(REF)).latest_session_id == s3.session_id  # type: ignore[union-attr]
    reasons = [r.reason for r in await engine.store.rotations(REF)]
    assert reasons == [RotationReason.MANUAL, RotationReason.MANUAL]


async def test_session_new_with_text_rotates_then_lands_message(engine: Engine) -> None:
    await collect(engine, "old topic")
    events = await collect(engine, "/new let's plan the garden")
    assert types(events)[:2] == ["start", "rotation"] and events[-1].type == "end"
    latest = await engine.store.latest_segment(REF)
    messages = await engine.store.list_messages(latest.session_id)
    assert next(m.content for m in messages) == "let's plan the garden"


# -- B. trigger matrix ------------------------------------------------------------


async def test_session_rollover_temporal_expired(engine: Engine, clock: ManualClock) -> None:
    await collect(engine, "morning chat")
    s1 = (await engine.store.latest_segment(REF)).session_id
    clock.advance(timedelta(hours=12, seconds=1))
    events = await collect(engine, "back again")
    assert types(events)[:2] == ["start", "rotation"]
    assert events[1].reason == "idle" and events[1].from_session_id == s1
    latest = await engine.store.latest_segment(REF)
    assert latest.session_id != s1
    assert next(m.content for m in await engine.store.list_messages(latest.session_id)) == (
        "back again"
    )


async def test_session_rollover_temporal_within_window_noop(
    engine: Engine, clock: ManualClock
) -> None:
    await collect(engine, "morning chat")
    s1 = (await engine.store.latest_segment(REF)).session_id
    clock.advance(timedelta(hours=12))  # exactly the window: not longer than it
    events = await collect(engine, "still here")
    assert "rotation" not in types(events)
    assert (await engine.store.latest_segment(REF)).session_id == s1
    assert await engine.store.rotations(REF) == []


async def semantic_engine(
    tmp_path: Path,
    clock: ManualClock,
    scripted: ScriptedModel,
    database_url: str = "",
    **semantic: object,
) -> Engine:
    settings = make_settings(
        tmp_path,
        database_url=database_url,
        semantic={"enabled": True, "threshold": 0.8, "min_messages": 2, **semantic},
    )
    engine = build_engine(settings, clock=clock, models={"scripted": scripted})
    await engine.start()
    return engine


async def test_session_rollover_semantic_high_confidence(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> None:
    engine = await semantic_engine(tmp_path, clock, scripted, database_url)
    try:
        await collect(engine, "my sourdough bread starter smells sour, what flour helps")
        s1 = (await engine.store.latest_segment(REF)).session_id
        # Same topic: shared words, low confidence, no rotation.
        events = await collect(engine, "which flour makes the sourdough starter less sour")
        assert "rotation" not in types(events)
        # A new topic: no shared words, confidence 1.0 > 0.8.
        events = await collect(engine, "explain kubernetes ingress controllers")
        rotation = next(e for e in events if e.type == "rotation")
        assert rotation.reason == "semantic" and rotation.from_session_id == s1
        assert rotation.confidence == 1.0 and rotation.deciding_model == BUILTIN_JUDGE
        log = await engine.store.rotations(REF)
        assert log[-1].confidence == 1.0 and log[-1].deciding_model == BUILTIN_JUDGE
    finally:
        await engine.aclose()


# -- C. control model precedence -------------------------------------------------


def test_control_model_defaults_precedence() -> None:
    chain = resolve_control_chain(None, "model-a")
    assert chain[0].model == "model-a" and chain[0].source is ControlSource.DEFAULTS
    assert chain[-1].model == BUILTIN_JUDGE


def test_control_model_session_override_precedence() -> None:
    chain = resolve_control_chain("model-b", "model-a")
    assert [c.model for c in chain] == ["model-b", "model-a", BUILTIN_JUDGE]
    assert chain[0].source is ControlSource.SESSION


async def test_control_model_fallback_deterministic(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel
) -> None:
    chain = resolve_control_chain(None, None)
    assert [c.model for c in chain] == [BUILTIN_JUDGE]
    assert resolve_control_chain(None, None) == chain  # same inputs, same chain
    # And the decision it reaches is reproducible across independent runs.
    outcomes = []
    for run in range(2):
        engine = await semantic_engine(tmp_path / str(run), ManualClock(clock.now()), scripted)
        try:
            await collect(engine, "tomato seedlings need repotting soon")
            await collect(engine, "tomato seedlings are leggy and pale")
            events = await collect(engine, "what is the capital of mongolia")
            outcomes.append(
                [(e.reason, e.confidence, e.deciding_model) for e in events if e.type == "rotation"]
            )
        finally:
            await engine.aclose()
    assert outcomes[0] == outcomes[1] == [("semantic", 1.0, BUILTIN_JUDGE)]


async def test_control_model_reply_model_switch_keeps_control(
    tmp_path: Path, clock: ManualClock, database_url: str
) -> None:
    """C4: changing the reply model leaves the control model where it was."""
    judge_calls: list[str] = []

    def judge_reply(messages: Sequence[WireMessage]) -> str:
        judge_calls.append("judge")
        return '{"new_topic_confidence": 0.95}'

    judge = ScriptedModel("judge", judge_reply)
    reply_x, reply_y = ScriptedModel("x"), ScriptedModel("y")
    settings = make_settings(
        tmp_path,
        # `models` lets the key's override pick y (core/agent_access.py).
        agents={"defaults": {"model": "x", "control_model": "judge", "models": ["y"]}},
        database_url=database_url,
        semantic={"enabled": True, "min_messages": 2},
    )
    engine = build_engine(
        settings, clock=clock, models={"judge": judge, "x": reply_x, "y": reply_y}
    )
    await engine.start()
    try:
        await collect(engine, "talk about boats")
        await engine.store.set_overrides(REF, {"reply_model": "y"})
        events = await collect(engine, "and about sails")
        rotation = next(e for e in events if e.type == "rotation")
        assert rotation.deciding_model == "judge"
        assert judge_calls == ["judge"] and len(reply_y.requests) == 1
    finally:
        await engine.aclose()


# -- D. latest and history ----------------------------------------------------------


async def test_latest_context_uses_latest_only(engine: Engine, scripted: ScriptedModel) -> None:
    await collect(engine, "zebra facts in segment one")
    await collect(engine, "/new")
    await collect(engine, "giraffe facts in segment two")
    await collect(engine, "/new")
    await collect(engine, "okapi question in segment three")
    sent = " ".join(m["content"] for m in scripted.requests[-1])
    assert "okapi" in sent
    assert "zebra" not in sent and "giraffe" not in sent
    _, preview = await engine.turns.preview_context(KEY, ALICE)
    latest = await engine.store.latest_segment(REF)
    assert {m.source.split(":")[0] for m in preview.messages} == {latest.session_id}


async def test_history_recall_requires_explicit_selection(
    engine: Engine, scripted: ScriptedModel
) -> None:
    await collect(engine, "my locker combination is 4812")
    s1 = (await engine.store.latest_segment(REF)).session_id
    await collect(engine, "/new")
    await collect(engine, "what was my locker combination")
    assert "4812" not in " ".join(m["content"] for m in scripted.requests[-1])

    events = await collect(
        engine,
        "remind me of the locker combination",
        recall=RecallRequest("locker combination", "user asked about an earlier fact"),
    )
    assert events[-1].type == "end"
    sent = scripted.requests[-1]
    recall_block = next(m for m in sent if m["role"] == "system" and "4812" in m["content"])
    assert "user asked about an earlier fact" in recall_block["content"]
    latest = await engine.store.latest_segment(REF)
    user_message = [
        m for m in await engine.store.list_messages(latest.session_id) if m.role.value == "user"
    ][-1]
    recorded = user_message.metadata["recall"]
    assert recorded[0]["session_id"] == s1
    assert recorded[0]["rationale"] == "user asked about an earlier fact"


async def test_history_segment_immutable(engine: Engine) -> None:
    await collect(engine, "a message to archive")
    s1 = (await engine.store.latest_segment(REF)).session_id
    await collect(engine, "/new")
    before = await engine.store.list_messages(s1)

    from sessiongate.core.segments import Role

    with pytest.raises(ImmutableSegment):
        await engine.store.append_message(
            s1, role=Role.USER, content="late write", now=engine.sessions.clock.now()
        )
    assert isinstance(engine.store, SQLiteStore)  # SQLite only (conftest._SQLITE_ONLY)
    raw = sqlite3.connect(engine.store.path)
    attacks = [
        ("UPDATE messages SET content = 'rewritten' WHERE segment_id = ?", (s1,)),
        ("DELETE FROM messages WHERE segment_id = ?", (s1,)),
        (
            "INSERT INTO messages (segment_id, seq, role, content, status, created_at)"
            " VALUES (?, 99, 'user', 'x', 'complete', 0)",
            (s1,),
        ),
        ("UPDATE segments SET message_count = 0 WHERE session_id = ?", (s1,)),
        ("UPDATE segments SET cleared_after_seq = 2 WHERE session_id = ?", (s1,)),
        ("DELETE FROM segments WHERE session_id = ?", (s1,)),
        ("UPDATE session_keys SET latest_session_id = ? WHERE key = 'alice/chat:alice'", (s1,)),
        ("UPDATE rotations SET reason = 'idle'", ()),
        ("DELETE FROM rotations", ()),
    ]
    for sql, params in attacks:
        with pytest.raises(sqlite3.DatabaseError):
            raw.execute(sql, params)
        raw.rollback()
    raw.close()
    assert await engine.store.list_messages(s1) == before
    assert (await engine.store.get_segment(s1)).status is SegmentStatus.ARCHIVED  # type: ignore[union-attr]


# -- E. debounce and reversal ------------------------------------------------------------


async def test_semantic_rollover_debounce(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> None:
    engine = await semantic_engine(
        tmp_path, clock, scripted, database_url, min_messages=0, cooldown="10m"
    )
    try:
        topics = [
            "volcanoes erupt magma",
            "jazz saxophone improvisation",
            "quantum entanglement photons",
            "medieval castle architecture",
            "marathon training intervals",
        ]
        rotations = 0
        for topic in topics:
            clock.advance(timedelta(minutes=1))
            events = await collect(engine, topic)
            rotations += sum(1 for e in events if e.type == "rotation")
        assert rotations == 1  # five shifts inside one 10-minute cooldown
        clock.advance(timedelta(minutes=10))
        events = await collect(engine, "deep sea anglerfish bioluminescence")
        assert [e.reason for e in events if e.type == "rotation"] == ["semantic"]
    finally:
        await engine.aclose()


async def test_semantic_rollover_reversible(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> None:
    engine = await semantic_engine(tmp_path, clock, scripted, database_url)
    try:
        await collect(engine, "planning a trip to lisbon in may")
        await collect(engine, "lisbon hotels near alfama please")
        s1 = (await engine.store.latest_segment(REF)).session_id
        events = await collect(engine, "which pastries should I try there")  # misfire
        s2 = next(e for e in events if e.type == "rotation").to_session_id
        all_before = {sid: await engine.store.list_messages(sid) for sid in (s1, s2)}

        latest, record = await engine.sessions.revert(KEY, ALICE)
        assert record.reason is RotationReason.REVERT and record.from_session_id == s2
        assert latest.continues == (s1, s2) and set(latest.parent_ids) == {s1, s2}
        for sid, messages in all_before.items():  # nothing rewritten, nothing lost
            assert await engine.store.list_messages(sid) == messages
        await collect(engine, "and a day trip to sintra")
        sent = " ".join(m["content"] for m in scripted.requests[-1])
        assert "alfama" in sent and "pastries" in sent and "sintra" in sent
    finally:
        await engine.aclose()


# -- F. legacy parity -------------------------------------------------------------------------


async def test_legacy_mode_new_inplace_clear(
    tmp_path: Path, clock: ManualClock, scripted: ScriptedModel, database_url: str
) -> None:
    engine = build_engine(
        make_settings(tmp_path, database_url=database_url, mode="legacy"),
        clock=clock,
        models={"scripted": scripted},
    )
    await engine.start()
    try:
        await collect(engine, "remember the word pelican")
        s1 = (await engine.store.latest_segment(REF)).session_id
        events = await collect(engine, "/new")
        rotation = next(e for e in events if e.type == "rotation")
        assert rotation.in_place and rotation.from_session_id == rotation.to_session_id == s1
        await collect(engine, "what word did I say")
        assert "pelican" not in " ".join(m["content"] for m in scripted.requests[-1])
        segment = await engine.store.latest_segment(REF)
        assert segment.session_id == s1 and len(await engine.store.chain(REF)) == 1
        assert segment.message_count == 4  # cleared from the context, not deleted
    finally:
        await engine.aclose()


async def test_segmented_mode_new_must_rotate(engine: Engine, scripted: ScriptedModel) -> None:
    await collect(engine, "remember the word pelican")
    s1 = (await engine.store.latest_segment(REF)).session_id
    events = await collect(engine, "/new")
    rotation = next(e for e in events if e.type == "rotation")
    assert not rotation.in_place and rotation.to_session_id != s1
    segment = await engine.store.get_segment(s1)
    assert segment is not None and segment.cleared_after_seq == 0  # no in-place clear
    assert len(await chain_ids(engine)) == 2
