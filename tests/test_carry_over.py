"""Carry-over at rotation (issue 21, DESIGN §12): with `carry_over = "summary"`, a
segment an idle rotation made starts its context with a summary of the previous segment,
written by the summary model at the rotation and recorded in the user message like a
recall, with its rationale; `/new` carries nothing, and by default (seed 003 D1) a new
segment starts empty. Through the engine and through `sessiongate serve`."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from websockets.asyncio.client import connect

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.context import assemble_context
from sessiongate.core.segments import Message, MessageStatus, RecallFragment, Role
from sessiongate.core.working_set import in_force
from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, WireMessage
from sessiongate.service import carry_over
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from tests.conftest import START
from tests.support.gateway import parse_sse
from tests.support.helpers import ScriptedModel, collect, types
from tests.support.served import Served, relay_model, served_gateway

SUMMARY = "They planned the launch for Thursday with Dana."
ALICE = Caller("alice")


def reply(messages: Any) -> str:
    if str(messages[0]["content"]).startswith("You compact the earlier part"):
        return SUMMARY
    return f"reply to: {messages[-1]['content']}"


def engine(tmp_path: Path, clock: ManualClock, model: ScriptedModel, **context: Any) -> Engine:
    return build_engine(
        Settings(
            data_dir=tmp_path,
            lifecycle={"timezone": "UTC", "idle_window": "1h"},
            models={"scripted": {"provider": "offline", "context_window": 4096}},
            agents={"defaults": {"model": "scripted", "context": context}},
        ),
        clock=clock,
        models={"scripted": model},
    )


def recall_block(request: list[dict[str, str]]) -> list[str]:
    return [m["content"] for m in request if m["role"] == "system" and SUMMARY in m["content"]]


async def test_an_idle_rotation_carries_a_summary_over(tmp_path: Path) -> None:
    clock = ManualClock(START)
    model = ScriptedModel(reply=reply)
    gw = engine(tmp_path, clock, model, carry_over="summary")
    await gw.start()
    try:
        for text in ("the launch is on Thursday", "Dana presents"):
            await collect(gw, text, key="c:carry")
        first = await gw.sessions.latest("c:carry", ALICE)
        clock.advance(timedelta(hours=2))
        events = await collect(gw, "where were we?", key="c:carry")
        assert [e.reason for e in events if e.type == "rotation"] == ["idle"]
        second = await gw.sessions.latest("c:carry", ALICE)
        assert second.session_id != first.session_id
        # The previous segment's whole span, summarised by the summary model.
        record = in_force(await gw.turns.compactor.records(first.session_id))
        assert record is not None and (record.first_seq, record.last_seq) == (1, 4)
        sent = next(r for r in model.requests if r[-1]["content"] == "where were we?")
        # What the model reads: the summary under its own honest header, not as a
        # recall "on explicit request" (nobody asked for it).
        (block,) = recall_block(sent)
        assert block == (
            "Summary of the previous conversation (carried over at rotation: idle time;"
            f" it covers its messages #1 to #4):\n{SUMMARY}"
        )
        # The turn waited for the summary, and said so.
        (waited,) = [e for e in events if e.type == "compaction"]
        assert (waited.status, waited.carried_from) == ("waited", first.session_id)
        assert waited.compaction_id == record.compaction_id
        assert waited.covers == {"first_seq": 1, "last_seq": 4, "count": 4}
        assert types(events).index("compaction") < types(events).index("token")
        # Recorded like a recall, with its rationale, in the user message.
        (asked,) = await gw.sessions.messages("c:carry", ALICE, second.session_id, limit=1)
        (carried,) = asked.metadata["recall"]
        assert carried["session_id"] == first.session_id
        assert carried["rationale"].startswith("carry-over: a summary of the previous segment")
        assert "(idle)" in carried["rationale"]
        # Later turns of the segment keep it; the preview shows it too.
        later = await collect(gw, "and then?", key="c:carry")
        sent = next(r for r in model.requests if r[-1]["content"] == "and then?")
        assert recall_block(sent)
        assert "compaction" not in types(later)  # nothing waited for, nothing to say
        _, preview = await gw.turns.preview_context("c:carry", ALICE)
        assert any(SUMMARY in m.content for m in preview.messages)
        # `/new` is the user's own fresh start: nothing carried.
        await collect(gw, "/new fresh topic", key="c:carry")
        sent = next(r for r in model.requests if r[-1]["content"] == "fresh topic")
        assert recall_block(sent) == []
    finally:
        await gw.aclose()


async def test_by_default_a_new_segment_starts_empty(tmp_path: Path) -> None:
    clock = ManualClock(START)
    model = ScriptedModel(reply=reply)
    gw = engine(tmp_path, clock, model)
    await gw.start()
    try:
        await collect(gw, "the launch is on Thursday", key="c:d1")
        first = await gw.sessions.latest("c:d1", ALICE)
        clock.advance(timedelta(hours=2))
        await collect(gw, "where were we?", key="c:d1")
        assert all(len(r) <= 2 for r in model.requests)  # system prompt at most, no summary
        assert await gw.turns.compactor.records(first.session_id) == ()
        assert len(model.requests) == 2  # nobody was asked for a summary
    finally:
        await gw.aclose()


def test_carry_over_through_sessiongate_serve(tmp_path: Path) -> None:
    """Rotations by idle time on a served gateway: the turn that waits for the summary
    says so on SSE and on the WebSocket (`compaction` with `carried_from`), and the
    model reads it under the carry-over header."""
    config = relay_model(tmp_path, "relay").replace(
        'provider = "command"', 'provider = "command"\ncontext_window = 4096'
    )
    config += (
        '[agents.defaults]\nmodel = "relay"\n[agents.defaults.context]\ncarry_over = "summary"\n'
    )
    with (
        served_gateway(tmp_path, config, {"alice": ("--primary",)}) as served,
        served.client("alice") as http,
    ):
        for text in ("alpha plan", "beta plan"):
            sent = http.post("/v1/sessions/c:s/messages", json={"content": text, "stream": False})
            assert sent.status_code == 200, sent.text
        patched = http.patch("/v1/sessions/c:s", json={"lifecycle": {"idle_window": "1s"}})
        assert patched.status_code == 200, patched.text
        time.sleep(1.5)
        answer = http.post("/v1/sessions/c:s/messages", json={"content": "back", "stream": True})
        assert answer.status_code == 200, answer.text
        events = parse_sse(answer.text)
        shown = http.get("/v1/sessions/c:s").json()
        assert [s["created_reason"] for s in shown["segments"]] == ["first", "idle"]
        first, second = (s["session_id"] for s in shown["segments"])
        (waited,) = [data for name, data in events if name == "compaction"]
        assert (waited["status"], waited["carried_from"]) == ("waited", first)
        assert waited["covers"]["last_seq"] == 4 and waited["compaction_id"]
        names = [name for name, _ in events]
        assert names.index("compaction") < names.index("token")
        listed = http.get(f"/v1/sessions/c:s/segments/{second}/messages").json()["messages"]
        (carried,) = listed[0]["metadata"]["recall"]
        assert carried["session_id"] == first and carried["rationale"].startswith("carry-over")
        context = http.get("/v1/sessions/c:s/context").json()
        (block,) = [m for m in context["messages"] if m["source"] == "carry_over"]
        assert block["content"].startswith(
            "Summary of the previous conversation (carried over at rotation: idle time;"
        )
        # The relay's summary answers the summariser's last message: the segment's lines.
        assert "alpha plan" in block["content"]
        assert not [m for m in context["messages"] if m["source"] == "recall"]

        # Idle again: the next rotation's turn, over the WebSocket, says so too.
        time.sleep(1.5)
        frames = asyncio.run(ws_turn(served, "c:s", "back again"))
        (waited,) = [f for f in frames if f["type"] == "compaction"]
        assert (waited["status"], waited["carried_from"]) == ("waited", second)
        assert frames[-1]["type"] == "complete"

        # And on the OpenAI route: the header names the summary the turn waited for.
        time.sleep(1.5)
        answer = http.post(
            "/v1/chat/completions",
            headers={"X-Session-Key": "c:s"},
            json={"model": "main", "messages": [{"role": "user", "content": "once more"}]},
        )
        assert answer.status_code == 200, answer.text
        assert answer.json()["session"]["rotation"]["reason"] == "idle"
        third = answer.json()["session"]["session_id"]
        carried = http.get("/v1/sessions/c:s/compactions").json()  # the latest segment's: none
        assert carried["compactions"] == [] and third != second
        named = answer.headers["X-Context-Compacted"]
        context = http.get("/v1/sessions/c:s/context").json()
        (block,) = [m for m in context["messages"] if m["source"] == "carry_over"]
        assert "back again" in block["content"]  # the summary of the second segment
        assert named  # one id: the record of the second segment the turn waited for
        assert "," not in named


async def ws_turn(served: Served, key: str, content: str) -> list[dict[str, Any]]:
    ws_url = served.url.replace("http://", "ws://") + "/v1/ws"
    async with connect(ws_url, open_timeout=5, proxy=None) as ws:
        await ws.send(served.keys["alice"])
        assert await ws.recv() == "authenticated"
        await ws.recv()  # ready
        await ws.send(json.dumps({"content": content, "session_id": key}))
        frames = []
        while True:
            frame = json.loads(await asyncio.wait_for(ws.recv(), 30))
            frames.append(frame)
            if frame["type"] in ("complete", "error"):
                return frames


class HeldSummary(ScriptedModel):
    """Answers like `reply`, but the summariser's request waits for `release` (or fails
    when `broken`)."""

    def __init__(self, *, broken: bool = False) -> None:
        super().__init__(reply=reply)
        self.release = asyncio.Event()
        self.broken = broken

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        if str(messages[0]["content"]).startswith("You compact the earlier part"):
            if self.broken:
                raise RuntimeError("the summariser is down")
            await self.release.wait()
        async for chunk in super().stream(messages, options):
            yield chunk


async def rotated_turn(
    tmp_path: Path, model: ScriptedModel, key: str
) -> tuple[Engine, ManualClock, str, list[Any]]:
    """Two turns, two idle hours, then the turn that rotates (its events)."""
    clock = ManualClock(START)
    gw = engine(tmp_path, clock, model, carry_over="summary")
    await gw.start()
    for text in ("the launch is on Thursday", "Dana presents"):
        await collect(gw, text, key=key)
    first = await gw.sessions.latest(key, ALICE)
    clock.advance(timedelta(hours=2))
    return gw, clock, first.session_id, await collect(gw, "where were we?", key=key)


async def test_a_turn_that_stops_waiting_for_the_summary_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(carry_over, "WAIT_SECONDS", 0.2)
    model = HeldSummary()
    gw, _, first, events = await rotated_turn(tmp_path, model, "c:late")
    try:
        (pending,) = [e for e in events if e.type == "compaction"]
        assert (pending.status, pending.carried_from, pending.compaction_id) == (
            "pending",
            first,
            None,
        )
        assert types(events)[-1] == "end"  # it went on without the summary
        sent = next(r for r in model.requests if r[-1]["content"] == "where were we?")
        assert recall_block(sent) == []
        # The summary is still being written; the next turn gets it.
        model.release.set()
        for _ in range(100):
            if in_force(await gw.turns.compactor.records(first)) is not None:
                break
            await asyncio.sleep(0.05)
        later = await collect(gw, "and then?", key="c:late")
        sent = next(r for r in model.requests if r[-1]["content"] == "and then?")
        assert recall_block(sent) and "compaction" not in types(later)
    finally:
        model.release.set()
        await gw.aclose()


async def test_a_failed_carry_over_is_announced_and_the_turn_goes_on(tmp_path: Path) -> None:
    model = HeldSummary(broken=True)
    gw, _, first, events = await rotated_turn(tmp_path, model, "c:broken")
    try:
        (failed,) = [e for e in events if e.type == "compaction"]
        assert (failed.status, failed.carried_from) == ("failed", first)
        assert types(events)[-1] == "end"
        sent = next(r for r in model.requests if r[-1]["content"] == "where were we?")
        assert recall_block(sent) == []
    finally:
        await gw.aclose()


def test_a_carried_summary_and_an_explicit_recall_are_sent_apart() -> None:
    def fragment(text: str, *, carried: str | None = None) -> RecallFragment:
        return RecallFragment(
            session_id="s-old",
            message_id="s-old:3",
            seq=3,
            role=Role.USER if carried is None else Role.SYSTEM,
            content=text,
            score=1.0 if carried else 0.4,
            rationale="why",
            created_at=START,
            carried_over=carried,
        )

    thread = [Message("s-new", 1, Role.USER, "hello again", MessageStatus.COMPLETE, START)]
    recalled = [fragment("the old summary", carried="semantic"), fragment("a recalled line")]
    context = assemble_context(thread=thread, memory_window=10, recalled=recalled)
    system = [(m.source, m.content) for m in context.messages if m.role == "system"]
    assert system == [
        (
            "carry_over",
            "Summary of the previous conversation (carried over at rotation: a new topic;"
            " it covers its messages #1 to #3):\nthe old summary",
        ),
        (
            "recall",
            "Recalled from earlier segments of this conversation, on explicit request:\n"
            "[s-old #3 user — why: why] a recalled line",
        ),
    ]
    # Both recorded with their rationale, as the turn's metadata keeps them.
    assert [r["rationale"] for r in context.recall] == ["why", "why"]
    # Short of budget, both go before the message being answered.
    tight = assemble_context(thread=thread, memory_window=10, recalled=recalled, token_budget=12)
    assert [m.source for m in tight.messages] == ["s-new:1"]
