"""Carry-over at rotation (issue 21, DESIGN §12): with `carry_over = "summary"`, a
segment an idle rotation made starts its context with a summary of the previous segment,
written by the summary model at the rotation and recorded in the user message like a
recall, with its rationale; `/new` carries nothing, and by default (seed 003 D1) a new
segment starts empty. Through the engine and through `sessiongate serve`."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.working_set import in_force
from sessiongate.service.engine import Engine, build_engine
from sessiongate.service.sessions import Caller
from tests.conftest import START
from tests.support.helpers import ScriptedModel, collect
from tests.support.served import relay_model, served_gateway

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
        (block,) = recall_block(sent)
        assert "carry-over" in block
        # Recorded like a recall, with its rationale, in the user message.
        (asked,) = await gw.sessions.messages("c:carry", ALICE, second.session_id, limit=1)
        (carried,) = asked.metadata["recall"]
        assert carried["session_id"] == first.session_id
        assert carried["rationale"].startswith("carry-over: a summary of the previous segment")
        assert "(idle)" in carried["rationale"]
        # Later turns of the segment keep it; the preview shows it too.
        await collect(gw, "and then?", key="c:carry")
        sent = next(r for r in model.requests if r[-1]["content"] == "and then?")
        assert recall_block(sent)
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
        answer = http.post("/v1/sessions/c:s/messages", json={"content": "back", "stream": False})
        assert answer.status_code == 200, answer.text
        shown = http.get("/v1/sessions/c:s").json()
        assert [s["created_reason"] for s in shown["segments"]] == ["first", "idle"]
        first, second = (s["session_id"] for s in shown["segments"])
        listed = http.get(f"/v1/sessions/c:s/segments/{second}/messages").json()["messages"]
        (carried,) = listed[0]["metadata"]["recall"]
        assert carried["session_id"] == first and carried["rationale"].startswith("carry-over")
        context = http.get("/v1/sessions/c:s/context").json()
        (block,) = [m for m in context["messages"] if m["source"] == "recall"]
        # The relay's summary answers the summariser's last message: the segment's lines.
        assert "alpha plan" in block["content"] and "carry-over" in block["content"]
