"""The working set through the engine and through `sessiongate serve` (issue 21): a
conversation far longer than its model's window never fails for length, never sends a
request over the window, and what the model stops seeing is announced
(`context_trimmed`); `compaction = "off"` keeps today's window."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.config import Settings
from sessiongate.core.context import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from sessiongate.core.keys import KeyRef
from sessiongate.core.working_set import in_force
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    TextDelta,
    Usage,
    WireMessage,
)
from sessiongate.service.engine import Engine, build_engine
from tests.support.helpers import ScriptedModel, collect, types
from tests.support.served import served_gateway
from tests.support.window_stub import WindowStub

WINDOW = 1024
PARAGRAPH = "The meeting moved to Thursday; bring the quarterly figures and the draft. " * 6


def engine(tmp_path: Path, url: str, context: dict[str, Any] | None = None) -> Engine:
    agent: dict[str, Any] = {"model": "m"}
    if context is not None:
        agent["context"] = context
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
            agents={"defaults": agent},
            lifecycle={"timezone": "UTC"},
        )
    )


async def test_a_conversation_longer_than_the_window_never_fails_and_never_passes_it(
    tmp_path: Path,
) -> None:
    async with WindowStub(WINDOW) as stub:
        gw = engine(tmp_path, stub.url)
        try:
            trimmed, compacted = [], []
            for turn in range(40):
                events = await collect(gw, f"turn {turn}: {PARAGRAPH}")
                assert types(events)[-1] == "end", events[-1]
                trimmed += [e for e in events if e.type == "context_trimmed"]
                compacted += [e for e in events if e.type == "compaction"]
            await gw.turns.drain()
        finally:
            await gw.aclose()
    assert stub.overflows == 0
    assert max(stub.prompt_tokens) <= WINDOW
    # The thread outgrew the budget: what the model stopped seeing raw was announced,
    # summarised (compaction) or left out (context_trimmed).
    assert compacted
    assert all(e.dropped > 0 and e.reason == "budget" for e in trimmed)
    # The estimate was corrected towards the stub's own count (its tokens are smaller).
    ratio = gw.turns.calibration.ratio("m")
    assert ratio > 1.0


async def test_compaction_off_keeps_the_window_and_the_overflow_fails_as_before(
    tmp_path: Path,
) -> None:
    async with WindowStub(WINDOW) as stub:
        gw = engine(tmp_path, stub.url, {"compaction": "off"})
        try:
            ends = []
            for turn in range(12):
                events = await collect(gw, f"turn {turn}: {PARAGRAPH}")
                ends.append(events[-1].type)
                assert not [e for e in events if e.type == "context_trimmed"]
        finally:
            await gw.aclose()
    assert "error" in ends
    assert stub.overflows > 0  # seed 004's hard window is the operator's choice


async def test_an_overflow_answer_is_retried_once_with_a_smaller_context(tmp_path: Path) -> None:
    # The stub's tokenizer counts far more tokens than the gateway estimates: a full
    # context passes the window, the provider answers context_length_exceeded, the turn
    # retries once with half the budget (announced) and goes on.
    async with WindowStub(WINDOW, chars_per_token=1.0) as stub:
        gw = engine(tmp_path, stub.url)
        try:
            retried = 0
            for turn in range(15):
                events = await collect(gw, f"turn {turn}: {PARAGRAPH}")
                assert types(events)[-1] == "end", events[-1]
                retried += sum(
                    1 for e in events if e.type == "context_trimmed" and e.reason == "overflow"
                )
        finally:
            await gw.aclose()
    assert stub.overflows >= 1 and retried == stub.overflows
    answered = [t for t in stub.prompt_tokens if t <= WINDOW]
    assert len(answered) == len(stub.prompt_tokens) - stub.overflows


async def test_served_gateway_long_conversation_stays_within_the_window(tmp_path: Path) -> None:
    async with WindowStub(WINDOW) as stub:
        config = (
            f'[models.fake]\nprovider = "openai"\nmodel = "fake-model"\n'
            f'base_url = "{stub.url}/v1"\nmax_retries = 0\ncontext_window = {WINDOW}\n'
            '[agents.defaults]\nmodel = "fake"\n'
        )
        with served_gateway(tmp_path, config, {"alice": ()}) as served:
            auth = {"Authorization": f"Bearer {served.keys['alice']}"}
            async with httpx.AsyncClient(base_url=served.url, timeout=60) as client:
                announced = 0
                for turn in range(30):
                    answer = await client.post(
                        "/v1/sessions/chat:long/messages",
                        headers=auth,
                        json={"content": f"turn {turn}: {PARAGRAPH}", "stream": False},
                    )
                    assert answer.status_code == 200, answer.text
                    body = answer.json()
                    announced += len(body.get("context_trimmed", []))
                    announced += len(body.get("compaction", []))
                streamed = await client.post(
                    "/v1/sessions/chat:long/messages",
                    headers=auth,
                    json={"content": f"last: {PARAGRAPH}", "stream": True},
                )
                assert "event: end" in streamed.text
                shown = await client.get("/v1/sessions/chat:long/context", headers=auth)
                sources = [m["source"] for m in shown.json()["messages"]]
    assert stub.overflows == 0 and max(stub.prompt_tokens) <= WINDOW
    assert announced > 0
    assert any(source.startswith("compaction:") for source in sources)


def is_summary_request(messages: Any) -> bool:
    return str(messages[0]["content"]).startswith("You compact the earlier part")


def summary_requests(model: ScriptedModel) -> list[list[dict[str, str]]]:
    return [r for r in model.requests if is_summary_request(r)]


async def drained_turns(gw: Engine, key: str, count: int, prefix: str = "turn") -> None:
    """`count` turns on `key`, each followed by the compaction it found due."""
    for turn in range(count):
        await collect(gw, f"{prefix} {turn}", key=key)
        await gw.turns.drain()


def short_window_engine(tmp_path: Path, model: ScriptedModel) -> Engine:
    """`model` answering every request, summaries too, with a 4-message window: a
    compaction is due from the third turn on."""
    return build_engine(
        Settings(
            data_dir=tmp_path,
            models={"scripted": {"provider": "offline", "context_window": 4096}},
            agents={
                "defaults": {"model": "scripted", "memory_window": 4, "context": {"keep_recent": 2}}
            },
            lifecycle={"timezone": "UTC"},
        ),
        models={"scripted": model},
    )


async def test_a_summary_left_out_for_the_budget_is_announced(tmp_path: Path) -> None:
    """The summary in force stands for messages older than the window; when even it
    does not fit, what it stood for is counted in `context_trimmed`, never lost silently.
    (The summariser never stores a summary longer than what it read, so such a record
    comes from a wider window: another gateway's model, or before a config change.)"""
    huge = "x " * 16_000  # about 8,000 estimated tokens: past the whole budget
    model = ScriptedModel(reply=lambda messages: "ok")
    gw = short_window_engine(tmp_path, model)
    await gw.start()
    try:
        await drained_turns(gw, "c:huge", 3)
        segment = await gw.store.latest_segment(KeyRef("alice", "c:huge"))
        compactor = gw.turns.compactor
        small = in_force(await compactor.records(segment.session_id))
        assert small is not None and small.summary == "ok"
        record = replace(
            small,
            compaction_id="wider-window",
            summary=huge,
            tokens_after=8_000,
            created_at=small.created_at + timedelta(seconds=1),
            previous_compaction_id=small.compaction_id,
        )
        assert compactor.rows is not None
        await compactor.rows.add(record)
        assert in_force(await compactor.records(segment.session_id, fresh=True)) == record
        events = await collect(gw, "and now?", key="c:huge")
    finally:
        await gw.aclose()
    sent = next(r for r in model.requests if r[-1]["content"] == "and now?")
    assert all(huge.strip() not in m["content"] for m in sent)
    (trimmed,) = [e for e in events if e.type == "context_trimmed"]
    # Everything before the window the summary stood for (the window: seqs 5-8).
    assert trimmed.dropped >= record.last_seq


async def test_a_summary_no_shorter_than_its_span_is_refused(tmp_path: Path) -> None:
    """A small model may answer a summary request with more than it read (a letter, the
    messages again): that record would cost more of the budget than the messages it
    stands for, so it is refused like a failed summary: nothing stored, the turn trims
    (announced) and a later turn tries again."""
    longer = "a long letter instead of a summary " * 200

    def reply(messages: Any) -> str:
        if is_summary_request(messages):
            return longer
        return "ok"

    model = ScriptedModel(reply=reply)
    gw = short_window_engine(tmp_path, model)
    await gw.start()
    try:
        await drained_turns(gw, "c:letter", 3)
        asked = summary_requests(model)
        assert asked  # the summariser was asked, and answered
        segment = await gw.store.latest_segment(KeyRef("alice", "c:letter"))
        assert await gw.turns.compactor.records(segment.session_id, fresh=True) == ()
        events = await collect(gw, "and now?", key="c:letter")
    finally:
        await gw.aclose()
    assert types(events)[-1] == "end"
    failed = [e for e in events if e.type == "compaction"]
    assert failed and all(e.status == "failed" for e in failed)
    (trimmed,) = [e for e in events if e.type == "context_trimmed"]
    assert trimmed.dropped > 0
    sent = next(r for r in model.requests if r[-1]["content"] == "and now?")
    assert all(longer.strip() not in str(m["content"]) for m in sent)


class CountingModel(ScriptedModel):
    """Answers "ok" (a summary too) and reports, for summary requests only, `factor`
    times the gateway's own estimate of their prompt; turns report an estimate, which
    teaches nothing: so any correction comes from the summaries."""

    def __init__(self, factor: float, *, summaries_estimated: bool = False) -> None:
        super().__init__(reply=lambda messages: "ok")
        self.factor = factor
        self.summaries_estimated = summaries_estimated

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.requests.append([dict(m) for m in messages])
        yield TextDelta("ok")
        if is_summary_request(messages):
            estimate = sum(
                estimate_tokens(str(m["content"])) + MESSAGE_OVERHEAD_TOKENS for m in messages
            )
            reported = int(estimate * self.factor)
            yield Usage(prompt_tokens=reported, estimated=self.summaries_estimated)
        else:
            yield Usage(prompt_tokens=7, estimated=True)


@pytest.mark.parametrize(("estimated", "corrected"), [(False, True), (True, False)])
async def test_summary_requests_correct_the_estimate(
    tmp_path: Path, estimated: bool, corrected: bool
) -> None:
    """A server whose streamed turns report no usage may still count the summary
    request's prompt: that count corrects the model's estimate as a turn's does (an
    estimate the provider made up teaches nothing)."""
    model = CountingModel(1.8, summaries_estimated=estimated)
    gw = short_window_engine(tmp_path, model)
    await gw.start()
    try:
        await drained_turns(gw, "c:count", 3)
        asked = summary_requests(model)
        assert asked
        ratio = gw.turns.calibration.ratio("scripted")
    finally:
        await gw.aclose()
    assert (ratio > 1.0) is corrected
    assert ratio <= 1.8


async def test_a_model_that_cannot_summarise_is_not_asked_on_every_turn(tmp_path: Path) -> None:
    """After consecutive failed summaries of a segment the compactor waits 1, 3, 7 … due
    turns before asking again (each of those turns trims, announced); a summary that
    succeeds starts the count over."""
    can_summarise = False

    def reply(messages: Any) -> str:
        if is_summary_request(messages):
            return "short summary" if can_summarise else "a letter instead " * 400
        return "ok"

    model = ScriptedModel(reply=reply)
    gw = short_window_engine(tmp_path, model)

    def asked() -> int:
        return len(summary_requests(model))

    await gw.start()
    try:
        trims = 0
        for turn in range(14):
            events = await collect(gw, f"turn {turn}", key="c:weak")
            trims += sum(1 for e in events if e.type == "context_trimmed")
            await gw.turns.drain()
        # Due from the third turn on (12 due turns): asked at the 1st, 2nd, 4th, 8th of
        # them (backoff 0, 1, 3, then 7 turns), not 12 times.
        assert asked() == 4
        assert trims >= 10  # every turn past the window trims, announced
        can_summarise = True
        # The backoff runs out (7 turns), then a summary is stored.
        await drained_turns(gw, "c:weak", 8, prefix="later")
        segment = await gw.store.latest_segment(KeyRef("alice", "c:weak"))
        record = in_force(await gw.turns.compactor.records(segment.session_id))
        assert record is not None and record.summary == "short summary"
        # A success starts the count over: failing again, the next attempt comes at the
        # next due turn (backoff 0, then 1), not 15 turns later.
        can_summarise = False
        before = asked()
        await drained_turns(gw, "c:weak", 6, prefix="again")
        assert asked() - before >= 2
    finally:
        await gw.aclose()
