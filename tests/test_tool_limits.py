"""`[limits] max_tool_argument_chars` and `max_tool_calls_per_step` (agents/tool_steps.py):
a call whose arguments are too large is not run and only their head is kept anywhere, calls
past the per-step limit get error results instead of runs, and the provider adapters keep
no more of a call's arguments than the request's limit while streaming.

First against the engine with a scripted tool model, then the adapters against local fake
servers, then `sessiongate serve` as a subprocess whose model is a fake OpenAI-compatible
server streaming megabytes of arguments.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import ValidationError

from sessiongate.agents.tool_steps import MAX_REFUSED_CALLS
from sessiongate.config import Settings
from sessiongate.config.limits import LimitsConfig
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.plans import repair_prompt
from sessiongate.core.segments import Message, Role
from sessiongate.models.anthropic.adapter import AnthropicModel
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    TextDelta,
    ToolCallChunk,
    ToolSpec,
    Usage,
    WireMessage,
)
from sessiongate.models.openai.adapter import OpenAIChatModel
from sessiongate.models.openai.wire import ToolCallPieces
from sessiongate.service.engine import Engine, build_engine
from tests.support.agent_models import Call, Request, ToolModel, toolbox
from tests.support.fake_providers import (
    FakeCall,
    FakeServer,
    Reply,
    anthropic_tool_events,
    consume_with,
    openai_events,
    openai_tool_events,
)
from tests.support.gateway import parse_sse
from tests.support.helpers import collect
from tests.support.served_fake_model import serve_with_fake_model

REF = KeyRef("alice", "chat:alice")
SMALL_LIMITS = {"max_tool_argument_chars": 1_000, "max_tool_calls_per_step": 2}


def limited_engine(
    tmp_path: Path, clock: ManualClock, model: ToolModel, runner: str = "chat"
) -> Engine:
    settings = Settings(
        data_dir=tmp_path,
        lifecycle={"timezone": "UTC"},
        agents={"main": {"model": model.name, "runner": runner, "tools": ["add", "echo"]}},
        models={},
        limits=SMALL_LIMITS,
    )
    engine = build_engine(settings, clock=clock, models={model.name: model})
    engine.tools.add_source(toolbox())
    return engine


@pytest.fixture
async def running() -> AsyncIterator[list[Engine]]:
    engines: list[Engine] = []
    yield engines
    for engine in engines:
        await engine.aclose()


async def stored(engine: Engine) -> list[Message]:
    latest = await engine.store.latest_segment(REF)
    return await engine.store.list_messages(latest.session_id)


def wire_size(messages: Sequence[WireMessage]) -> int:
    return len(json.dumps(list(messages)))


# -- configuration ----------------------------------------------------------------------------


def test_the_limits_have_defaults_and_a_validated_range() -> None:
    limits = LimitsConfig()
    assert (limits.max_tool_argument_chars, limits.max_tool_calls_per_step) == (100_000, 32)
    for bad in (
        {"max_tool_argument_chars": 999},
        {"max_tool_argument_chars": 10_000_001},
        {"max_tool_calls_per_step": 0},
        {"max_tool_calls_per_step": 1001},
    ):
        with pytest.raises(ValidationError):
            LimitsConfig(**bad)


# -- the chat runner ----------------------------------------------------------------------------


async def test_arguments_over_the_limit_are_not_run_and_only_their_head_is_kept(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    huge = {"text": "x" * 50_000}
    size = len(json.dumps(huge))
    model = ToolModel([Call("echo", huge, "big"), Call("add", {"a": 2, "b": 3}, "small")], "ok")
    engine = limited_engine(tmp_path, clock, model)
    running.append(engine)
    await engine.start()

    events = await collect(engine, "echo a lot")
    assert events[-1].type == "end", events
    start = next(e for e in events if e.type == "tool_start" and e.call_id == "big")
    assert start.input == json.dumps(huge)[:1000]  # the head, as text: it is not JSON
    ends = {e.call_id: e for e in events if e.type == "tool_end"}
    assert ends["big"].status == "error"
    assert ends["big"].output == (
        f"error: the arguments were too large ({size} characters; at most 1000 are"
        " accepted), so the call was not run"
    )
    assert (ends["small"].status, ends["small"].output) == ("ok", "5")  # its neighbour ran

    kept = await stored(engine)
    calls = kept[1].metadata["tool_calls"]
    assert calls[0] == {
        "id": "big",
        "name": "echo",
        "arguments": json.dumps(huge)[:1000],
        "arguments_truncated": True,
        "argument_chars": size,
    }
    assert "arguments_truncated" not in calls[1]
    big_result = next(m for m in kept if m.metadata.get("tool_call_id") == "big")
    assert big_result.metadata["status"] == "error"

    # The next step of the turn, and a later turn, carry only the head.
    step_two = model.requests[1].messages
    assert step_two[-3]["tool_calls"][0]["arguments"] == json.dumps(huge)[:1000]
    assert wire_size(step_two) < 5_000
    await collect(engine, "hello again")
    later = model.requests[-1].messages
    assert [m["role"] for m in later][-5:] == ["assistant", "tool", "tool", "assistant", "user"]
    assert wire_size(later) < 5_000


async def test_calls_past_the_per_step_limit_get_error_results_not_runs(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    calls = [Call("add", {"a": n, "b": 1}, f"c{n}") for n in range(5)]
    model = ToolModel(calls, "done")
    engine = limited_engine(tmp_path, clock, model)
    running.append(engine)
    await engine.start()

    events = await collect(engine, "add five times")
    assert events[-1].type == "end", events
    assert [e.call_id for e in events if e.type == "tool_start"] == [c.call_id for c in calls]
    ends = {e.call_id: e for e in events if e.type == "tool_end"}
    assert [(ends[c].status, ends[c].output) for c in ("c0", "c1")] == [("ok", "1"), ("ok", "2")]
    for refused in ("c2", "c3", "c4"):
        assert ends[refused].status == "error"
        assert ends[refused].output == "error: too many tool calls in one step; at most 2 run"

    # Every call has its one result, so the thread stays valid for the model.
    kept = await stored(engine)
    results = {m.metadata["tool_call_id"]: m for m in kept if m.role is Role.TOOL}
    assert sorted(results) == ["c0", "c1", "c2", "c3", "c4"]
    sent = model.requests[1].messages
    assert [m["tool_call_id"] for m in sent if m["role"] == "tool"] == [
        "c0",
        "c1",
        "c2",
        "c3",
        "c4",
    ]
    assert [m["status"] for m in sent if m["role"] == "tool"] == ["ok"] * 2 + ["error"] * 3


async def test_a_runaway_step_keeps_a_bounded_number_of_calls_and_says_how_many_it_dropped(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    # 2 run and MAX_REFUSED_CALLS are refused; the other 20,000 are kept nowhere.
    calls = [Call("add", {"a": n, "b": 1}, f"c{n}") for n in range(20_000 + 2 + MAX_REFUSED_CALLS)]
    model = ToolModel(calls, "done")
    engine = limited_engine(tmp_path, clock, model)
    running.append(engine)
    await engine.start()

    events = await collect(engine, "add many times")
    assert events[-1].type == "end", events
    kept_calls = 2 + MAX_REFUSED_CALLS
    assert len([e for e in events if e.type == "tool_start"]) == kept_calls
    messages = await stored(engine)
    asked = next(m for m in messages if m.metadata.get("tool_calls"))
    assert len(asked.metadata["tool_calls"]) == kept_calls
    assert asked.metadata["dropped_tool_calls"] == 20_000
    assert len([m for m in messages if m.role is Role.TOOL]) == kept_calls
    # The thread the model gets next holds every kept call with its result, no more.
    sent = model.requests[1].messages
    assert len([m for m in sent if m["role"] == "tool"]) == kept_calls
    assert wire_size(sent) < 50_000


async def test_the_model_is_told_the_argument_limit_so_adapters_keep_no_more(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel("no tools needed")
    engine = limited_engine(tmp_path, clock, model)
    running.append(engine)
    await engine.start()
    await collect(engine, "hi")
    assert model.requests[0].options.max_tool_argument_chars == 1_000


class HeadOnlyModel(ToolModel):
    """A tool model whose first step is one call an adapter cut: a head of 500 characters
    of arguments 2,000,000 long."""

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.requests.append(Request([dict(m) for m in messages], options))
        if len(self.requests) == 1:
            yield ToolCallChunk("cut", "echo", '{"text": "' + "y" * 490, 2_000_000)
        else:
            yield TextDelta("fine")
        yield Usage()


async def test_a_call_an_adapter_cut_is_refused_by_its_real_length(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    """The head fits the limit; the real length does not, and decides."""
    model = HeadOnlyModel()
    engine = limited_engine(tmp_path, clock, model)
    running.append(engine)
    await engine.start()
    events = await collect(engine, "go")
    end = next(e for e in events if e.type == "tool_end")
    assert end.status == "error" and "(2000000 characters; at most 1000" in end.output
    kept = await stored(engine)
    assert kept[1].metadata["tool_calls"][0]["argument_chars"] == 2_000_000


# -- the plan runner ------------------------------------------------------------------------------


async def test_a_plan_step_with_too_large_an_input_is_sent_back_for_repair(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    too_large = {"plan": [{"step": 1, "tool": "echo", "tool_input": {"text": "z" * 5_000}}]}
    fine = {"plan": [{"step": 1, "tool": "echo", "tool_input": {"text": "short"}}]}
    model = ToolModel(json.dumps(too_large), json.dumps(fine), "explained", repeat_last=False)
    engine = limited_engine(tmp_path, clock, model, runner="plan_execute")
    running.append(engine)
    await engine.start()
    events = await collect(engine, "plan it")
    assert events[-1].type == "end", events
    size = len(json.dumps(too_large["plan"][0]["tool_input"], ensure_ascii=False))
    problem = f"step 1's tool_input is too large ({size} characters as JSON; at most 1000)"
    assert model.requests[1].messages[-1]["content"] == repair_prompt(problem)
    assert [e.output for e in events if e.type == "tool_end"] == ["alice:short"]


# -- the adapters keep at most the limit while streaming -------------------------------------------

SPEC = ToolSpec("echo", "Echo text.")
RUNAWAY = FakeCall("call_r", "echo", tuple("r" * 5_000 for _ in range(60)))


def test_tool_call_pieces_keep_the_head_and_count_the_rest() -> None:
    pieces = ToolCallPieces(max_argument_chars=100)
    pieces.add([{"index": 0, "id": "c", "function": {"name": "echo", "arguments": "a" * 60}}])
    pieces.add([{"index": 0, "function": {"arguments": "b" * 60}}])
    pieces.add([{"index": 0, "function": {"arguments": "c" * 1000}}])
    pieces.add([{"index": 1, "id": "d", "function": {"name": "echo", "arguments": "{}"}}])
    cut, whole = pieces.finish()
    assert cut == ToolCallChunk("c", "echo", "a" * 60 + "b" * 40, 1120)
    assert whole == ToolCallChunk("d", "echo", "{}")


@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_a_runaway_call_streams_through_an_adapter_in_bounded_memory(provider: str) -> None:
    options = ModelOptions(tools=(SPEC,), tool_choice="auto", max_tool_argument_chars=5_000)
    size = len(RUNAWAY.arguments)
    if provider == "openai":
        events = openai_tool_events([], [RUNAWAY])
    else:
        events = anthropic_tool_events([], [RUNAWAY])
    async with FakeServer(Reply(events=events)) as server:
        model: OpenAIChatModel | AnthropicModel
        if provider == "openai":
            model = OpenAIChatModel("f", model="m", base_url=server.url + "/v1", max_retries=0)
        else:
            model = AnthropicModel("f", model="m", base_url=server.url, max_retries=0)
        try:
            outcome = await consume_with(model, [{"role": "user", "content": "go"}], options)
        finally:
            await model.aclose()
    assert outcome.error is None
    (call,) = outcome.calls
    assert call.arguments == RUNAWAY.arguments[:5_000]
    assert call.argument_chars == size == 300_000


# -- end to end: `sessiongate serve` against a fake OpenAI-compatible server -----------------------

MB_ARGUMENTS = json.dumps({"title": "m" * 2_000_000})
SERVED_AGENT = """
[agents.main]
model = "fake"
tools = ["tasks_add", "tasks_list"]
[limits]
max_tool_calls_per_step = 3
"""


def turn_events(response: httpx.Response) -> list[tuple[str, dict[str, Any]]]:
    assert response.status_code == 200, response.text
    return parse_sse(response.text)


async def test_served_megabytes_of_arguments_and_too_many_calls_stay_bounded(
    tmp_path: Path,
) -> None:
    huge = FakeCall("call_huge", "tasks_add", (MB_ARGUMENTS,))
    listing = FakeCall("call_list", "tasks_list", ("{}",))
    many = [FakeCall(f"call_{n}", "tasks_list", ("{}",)) for n in range(5)]
    replies = [
        Reply(events=openai_tool_events([], [huge, listing])),  # turn 1, step 1
        Reply(events=openai_events(["noted"])),  # turn 1, step 2
        Reply(events=openai_events(["hi", " again"])),  # turn 2
        Reply(events=openai_tool_events([], many)),  # turn 3, step 1
        Reply(events=openai_events(["listed"])),  # turn 3, step 2
    ]
    async with FakeServer(*replies) as provider:
        with serve_with_fake_model(tmp_path, provider.url, SERVED_AGENT) as served:
            async with httpx.AsyncClient(
                base_url=served.url, headers=served.auth, timeout=60
            ) as client:
                path = "/v1/sessions/limits:tools/messages"
                first = await client.post(path, json={"content": "add a huge task"})
                events = turn_events(first)
                turn_id = events[0][1]["turn_id"]
                replay = await client.get(f"/v1/turns/{turn_id}/events")
                second = await client.post(path, json={"content": "hello again"})
                third = await client.post(path, json={"content": "list five times"})
                session = (await client.get("/v1/sessions/limits:tools")).json()
                session_id = session["latest"]["session_id"]
                listed = await client.get(
                    f"/v1/sessions/limits:tools/segments/{session_id}/messages"
                )

    # Turn 1: the huge call was shown cut, answered with an error, its neighbour ran.
    starts = {d["call_id"]: d for kind, d in events if kind == "tool_start"}
    assert starts["call_huge"]["input"] == MB_ARGUMENTS[:1000]
    ends = {d["call_id"]: d for kind, d in events if kind == "tool_end"}
    assert ends["call_huge"]["status"] == "error"
    assert (
        "arguments were too large (2000013 characters; at most 100000"
        in (ends["call_huge"]["output"])
    )
    assert ends["call_list"]["status"] == "ok"
    assert events[-1][0] == "end"
    assert len(first.content) < 20_000
    # The replay journal holds the cut form only.
    assert replay.status_code == 200 and len(replay.content) < 20_000
    replayed = {d["call_id"]: d for kind, d in parse_sse(replay.text) if kind == "tool_start"}
    assert replayed["call_huge"]["input"] == MB_ARGUMENTS[:1000]
    # The model's next step and the next turn were sent the head, not the megabytes.
    step_two, hello_again = provider.requests[1], provider.requests[2]
    assert len(step_two.raw) < 20_000 and len(hello_again.raw) < 20_000
    sent_calls = hello_again.body["messages"][1]["tool_calls"]
    assert sent_calls[0]["function"]["arguments"] == MB_ARGUMENTS[:1000]
    assert turn_events(second)[-1][0] == "end"

    # Turn 3: five calls in one step with at most three per step.
    third_events = turn_events(third)
    ends = {d["call_id"]: d for kind, d in third_events if kind == "tool_end"}
    assert [ends[f"call_{n}"]["status"] for n in range(5)] == ["ok"] * 3 + ["error"] * 2
    assert ends["call_4"]["output"] == "error: too many tool calls in one step; at most 3 run"
    answered = [
        m["tool_call_id"] for m in provider.requests[4].body["messages"] if m["role"] == "tool"
    ]
    assert answered[-5:] == [f"call_{n}" for n in range(5)]

    # The store keeps the cut call, marked with its real size.
    messages = listed.json()["messages"]
    asked = next(m for m in messages if m["role"] == "assistant")
    huge_call = asked["metadata"]["tool_calls"][0]
    assert huge_call["arguments"] == MB_ARGUMENTS[:1000]
    assert huge_call["arguments_truncated"] is True
    assert huge_call["argument_chars"] == len(MB_ARGUMENTS)
