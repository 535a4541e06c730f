"""The `chat` runner: the function-calling loop, its limits and what every step keeps."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, Role
from sessiongate.core.users import Caller
from sessiongate.errors import ConfigError
from sessiongate.models.base import ToolSpec
from sessiongate.service.engine import Engine, build_engine
from tests.conftest import make_settings
from tests.support.agent_models import Call, ToolModel, toolbox
from tests.support.helpers import ScriptedModel, collect, types

KEY = "chat:alice"
REF = KeyRef("alice", KEY)

TOOLBOX = ("add", "crash", "echo", "fail", "huge", "sleep")


def agent_engine(
    tmp_path: Path,
    clock: ManualClock,
    model: ToolModel,
    database_url: str = "",
    **agent: Any,
) -> Engine:
    hang = agent.pop("_hang", None)
    # The test toolbox's tools by name: "*" would also offer the built-ins.
    config: dict[str, Any] = {"model": model.name, "tools": list(TOOLBOX), **agent}
    engine = build_engine(
        make_settings(tmp_path, {"main": config}, database_url=database_url),
        clock=clock,
        models={model.name: model},
    )
    engine.tools.add_source(toolbox(hang))
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


async def test_two_parallel_calls_then_an_answer(
    tmp_path: Path, clock: ManualClock, database_url: str, running: list[Engine]
) -> None:
    model = ToolModel(
        [Call("add", {"a": 2, "b": 3}, "c1"), Call("echo", {"text": "hi"}, "c2")],
        "It is 5 .",
    )
    engine = agent_engine(tmp_path, clock, model, database_url)
    running.append(engine)
    await engine.start()
    events = await collect(engine, "add 2 and 3")
    assert types(events)[:5] == ["start", "tool_start", "tool_start", "tool_end", "tool_end"]
    assert types(events)[-1] == "end"
    ends = {e.call_id: e for e in events if e.type == "tool_end"}
    assert ends["c1"].output == "5" and ends["c1"].status == "ok"
    assert ends["c2"].output == "alice:hi"
    starts = [e for e in events if e.type == "tool_start"]
    assert starts[0].input == {"a": 2, "b": 3}

    messages = await stored(engine)
    assert [m.role for m in messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert [c["id"] for c in messages[1].metadata["tool_calls"]] == ["c1", "c2"]
    assert {m.metadata["tool_call_id"] for m in messages[2:4]} == {"c1", "c2"}
    assert messages[-1].content.strip() == "It is 5 ."
    assert messages[-1].metadata["tool_steps"] == 1
    assert events[-1].message_id == messages[-1].message_id

    # The second call saw the calls, then one result per call in call order.
    second = model.requests[1].messages
    assert second[-3]["tool_calls"][0]["name"] == "add"
    assert [(m["role"], m["tool_call_id"]) for m in second[-2:]] == [("tool", "c1"), ("tool", "c2")]
    assert [s.name for s in model.requests[0].options.tools] == [
        "add",
        "crash",
        "echo",
        "fail",
        "huge",
        "sleep",
    ]

    # The next turn's context holds the whole step, paired.
    model.steps.append("again")
    await collect(engine, "and now?")
    third = model.requests[2].messages
    roles = [m["role"] for m in third]
    assert roles == ["user", "assistant", "tool", "tool", "assistant", "user"]


async def test_bad_arguments_unknown_tools_and_failures_are_results_not_errors(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel(
        [
            Call("add", "{not json", "bad_json"),
            Call("add", {"a": "two", "b": 3}, "bad_schema"),
            Call("nope", {}, "unknown"),
            Call("fail", {}, "failed"),
            Call("crash", {}, "crashed"),
        ],
        "done",
    )
    engine = agent_engine(tmp_path, clock, model)
    running.append(engine)
    events = await collect(engine, "try everything")
    assert types(events)[-1] == "end"
    results = {e.call_id: e for e in events if e.type == "tool_end"}
    assert all(r.status == "error" for r in results.values())
    assert "not valid JSON" in results["bad_json"].output
    assert "do not match" in results["bad_schema"].output and "a" in results["bad_schema"].output
    assert "no tool named 'nope'" in results["unknown"].output
    assert results["failed"].output == "error: the service said no"
    assert "RuntimeError" in results["crashed"].output


async def test_a_tool_past_its_timeout_is_an_error_result(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel([Call("sleep", {}, "s1")], "gave up")
    engine = agent_engine(tmp_path, clock, model, tool_timeout="1s")
    running.append(engine)
    events = await collect(engine, "wait")
    end = next(e for e in events if e.type == "tool_end")
    assert end.status == "error" and "within 1 s" in end.output
    assert types(events)[-1] == "end"


async def test_max_tool_steps_then_one_call_without_tools(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    counter = iter(range(100))
    model = ToolModel(
        lambda msgs, opts: (
            [Call("add", {"a": next(counter), "b": 1})]
            if opts.tool_choice == "auto"
            else "final words"
        )
    )
    engine = agent_engine(tmp_path, clock, model, max_tool_steps=3)
    running.append(engine)
    events = await collect(engine, "count")
    assert types(events).count("tool_start") == 3
    assert len(model.requests) == 4
    last = model.requests[-1].options
    assert last.tool_choice == "none" and last.tools  # still declared: providers need it
    messages = await stored(engine)
    assert messages[-1].content.strip() == "final words"
    assert messages[-1].metadata["ended_by"] == "max_tool_steps"


async def test_a_model_repeating_the_same_call_is_stopped(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel(
        lambda msgs, opts: (
            [Call("add", {"a": 1, "b": 1})] if opts.tool_choice == "auto" else "stopping"
        )
    )
    engine = agent_engine(tmp_path, clock, model, max_tool_steps=20)
    running.append(engine)
    events = await collect(engine, "loop")
    assert types(events).count("tool_start") == 3
    assert (await stored(engine))[-1].metadata["ended_by"] == "loop"


async def test_turn_timeout_mid_tool_keeps_an_interrupted_result_and_the_thread_valid(
    tmp_path: Path, clock: ManualClock, database_url: str, running: list[Engine]
) -> None:
    model = ToolModel([Call("sleep", {}, "s1"), Call("add", {"a": 1, "b": 2}, "a1")], "ok")
    engine = agent_engine(tmp_path, clock, model, database_url, turn_timeout="1s")
    running.append(engine)
    await engine.start()
    events = await collect(engine, "hang please")
    assert events[-1].type == "error" and events[-1].code == "turn_timeout"
    ends = {e.call_id: e.status for e in events if e.type == "tool_end"}
    assert ends == {"s1": "interrupted", "a1": "ok"}
    messages = await stored(engine)
    tool_rows = {m.metadata["tool_call_id"]: m for m in messages if m.role is Role.TOOL}
    assert tool_rows["s1"].metadata["status"] == "interrupted"
    assert tool_rows["a1"].content == "3"
    # The key is free and the next model call gets a valid thread.
    model.steps = ["fine"]
    model.requests.clear()
    events = await collect(engine, "still there?")
    assert types(events)[-1] == "end"
    sent = model.requests[0].messages
    assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]


async def test_a_call_left_without_results_is_answered_interrupted_before_the_next_call(
    tmp_path: Path, clock: ManualClock, database_url: str, running: list[Engine]
) -> None:
    """What a process killed mid-step leaves: an assistant message asking for two tools
    and only one result. No provider would accept that thread as it is."""
    model = ToolModel("recovered")
    engine = agent_engine(tmp_path, clock, model, database_url)
    running.append(engine)
    await engine.start()
    await collect(engine, "first")  # creates the key
    latest = await engine.store.latest_segment(REF)
    now = clock.now()
    await engine.store.append_message(
        latest.session_id,
        role=Role.ASSISTANT,
        content="",
        now=now,
        metadata={
            "tool_calls": [
                {"id": "k1", "name": "add", "arguments": "{}"},
                {"id": "k2", "name": "echo", "arguments": "{}"},
            ]
        },
    )
    await engine.store.append_message(
        latest.session_id,
        role=Role.TOOL,
        content="2",
        now=now,
        metadata={"tool_call_id": "k2", "name": "echo", "status": "ok"},
    )
    await engine.store.append_message(  # an orphan: answers no call
        latest.session_id,
        role=Role.TOOL,
        content="stray",
        now=now,
        metadata={"tool_call_id": "zz", "name": "echo", "status": "ok"},
    )
    await collect(engine, "after the crash")
    sent = model.requests[-1].messages
    step = sent[-4:-1]
    assert step[0]["role"] == "assistant" and [c["id"] for c in step[0]["tool_calls"]] == [
        "k1",
        "k2",
    ]
    assert (step[1]["tool_call_id"], step[1]["status"]) == ("k1", "interrupted")
    assert (step[2]["tool_call_id"], step[2]["content"]) == ("k2", "2")
    assert all(m.get("content") != "stray" for m in sent)


async def test_the_model_sees_a_capped_result_and_the_store_keeps_it_whole(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel([Call("huge", {}, "h1")], "summarised")
    engine = agent_engine(tmp_path, clock, model, max_tool_result_chars=1000)
    running.append(engine)
    await collect(engine, "big")
    seen = model.requests[1].messages[-1]["content"]
    assert len(seen) <= 1000 and seen.startswith("HHH") and seen.endswith("TTT")
    assert "characters cut" in seen and "MIDDLE" not in seen
    whole = next(m for m in await stored(engine) if m.role is Role.TOOL)
    assert len(whole.content) == 20_006


async def test_tools_non_primary_narrows_what_other_users_are_offered(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel("hello")
    engine = agent_engine(tmp_path, clock, model, tools=["add", "echo"], tools_non_primary=["echo"])
    running.append(engine)
    await collect(engine, "hi", caller=Caller("alice"))
    await collect(engine, "hi", key="agent:main:main", caller=Caller("prime", primary=True))
    offered = [[s.name for s in r.options.tools] for r in model.requests]
    assert offered == [["echo"], ["add", "echo"]]


async def test_at_most_max_parallel_tools_run_at_once_and_the_model_sees_call_order(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    busy: list[int] = [0]
    peak: list[int] = [0]

    async def probe(arguments: dict[str, Any], context: ToolContext) -> str:
        busy[0] += 1
        peak[0] = max(peak[0], busy[0])
        # Later calls finish first, so completion order differs from call order.
        await asyncio.sleep(0.05 - 0.008 * arguments["n"])
        busy[0] -= 1
        return f"done {arguments['n']}"

    spec = ToolSpec(
        "probe",
        "Probe.",
        {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    )
    calls = [Call("probe", {"n": n}, f"p{n}") for n in range(5)]
    model = ToolModel(calls, "all done")
    engine = build_engine(
        make_settings(
            tmp_path,
            {"main": {"model": model.name, "tools": ["probe"], "max_parallel_tools": 2}},
        ),
        clock=clock,
        models={model.name: model},
    )
    engine.tools.add_source(StaticToolSource("probes", [FunctionTool(spec, probe)]))
    running.append(engine)
    await collect(engine, "probe five times")
    assert peak[0] == 2
    # Each result is stored as soon as it is done (a crash keeps the finished ones), in
    # completion order ...
    results = [m for m in await stored(engine) if m.role is Role.TOOL]
    by_call = {m.metadata["tool_call_id"]: m.content for m in results}
    assert by_call == {f"p{n}": f"done {n}" for n in range(5)}
    # ... and the model's next request has them right after the calls, in call order.
    sent = model.requests[1].messages
    assert [m.get("tool_call_id") for m in sent[-5:]] == [f"p{n}" for n in range(5)]


async def test_earlier_tool_steps_go_inline_when_this_caller_is_offered_no_tools(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Tool calls in a request that offers no tools are refused by some providers."""
    first = ToolModel([Call("add", {"a": 1, "b": 2}, "c1")], "three")
    engine = agent_engine(tmp_path, clock, first, tools=["add"])
    await collect(engine, "add", caller=Caller("alice"))
    await engine.aclose()

    later = ToolModel("again")
    engine = agent_engine(tmp_path, clock, later, tools=["add"], tools_non_primary=[])
    try:
        await collect(engine, "and now?", caller=Caller("alice"))
    finally:
        await engine.aclose()
    request = later.requests[0]
    assert request.options.tools == ()
    assert all(m["role"] in ("system", "user", "assistant") for m in request.messages)
    assert not any(m.get("tool_calls") for m in request.messages)
    assert any("three" in str(m["content"]) for m in request.messages)
    assert any("add" in str(m["content"]) and "3" in str(m["content"]) for m in request.messages)


async def test_delegation_runs_another_agent_on_a_sub_key(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel([Call("agent__helper", {"request": "what is up"}, "d1")], "relayed")
    helper = ScriptedModel("helperm", reply=lambda msgs: "the helper says hi")
    engine = build_engine(
        make_settings(
            tmp_path,
            {
                "main": {"model": model.name, "tools": ["agent__*"]},
                "helper": {"model": "helperm"},
            },
        ),
        clock=clock,
        models={model.name: model, "helperm": helper},
    )
    running.append(engine)
    events = await collect(engine, "ask the helper")
    end = next(e for e in events if e.type == "tool_end")
    assert end.status == "ok" and end.output == "the helper says hi"
    sub = await engine.store.latest_segment(KeyRef("alice", "chat:alice:to:helper"))
    assert sub.message_count == 2
    assert helper.requests[0][-1]["content"] == "what is up"


def test_an_agent_offering_tools_on_a_text_only_model_is_refused_at_start(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, {"main": {"model": "offline", "tools": ["notes_*"]}})
    with pytest.raises(ConfigError, match="cannot call tools"):
        build_engine(settings)


async def test_plan_execute_needs_no_native_tools(tmp_path: Path, clock: ManualClock) -> None:
    settings = make_settings(tmp_path, {"main": {"model": "offline", "runner": "plan_execute"}})
    engine = build_engine(settings, clock=clock)
    await engine.aclose()


async def test_a_cancelled_turn_during_tools_keeps_everything(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    hang = asyncio.Event()
    model = ToolModel([Call("sleep", {}, "s1")], "never")
    engine = agent_engine(tmp_path, clock, model, _hang=hang)
    running.append(engine)
    from sessiongate.service.turn.pipeline import InboundTurn

    handle = engine.turns.start_turn(InboundTurn(KEY, Caller("alice"), "go"))
    await asyncio.wait_for(hang.wait(), 5)
    await engine.turns.aclose()  # shutdown
    events = [e async for e in handle.events()]
    assert events[-1].type == "error" and events[-1].code == "turn_cancelled"
    messages = await stored(engine)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert messages[-1].metadata["status"] == "interrupted"


async def test_a_tool_turn_survives_export_and_import(
    tmp_path: Path, clock: ManualClock, running: list[Engine]
) -> None:
    model = ToolModel([Call("add", {"a": 1, "b": 1}, "c1")], "two")
    engine = agent_engine(tmp_path, clock, model)
    running.append(engine)
    await collect(engine, "one plus one")
    lines = await engine.sessions.export(KEY, Caller("alice"))
    await engine.sessions.import_chain(lines, Caller("alice"), key="copy")
    latest = await engine.store.latest_segment(KeyRef("alice", "copy"))
    copied = await engine.store.list_messages(latest.session_id)
    assert [m.role for m in copied] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert copied[2].metadata["tool_call_id"] == "c1" and copied[2].content == "2"
    model.steps = ["fine"]
    model.requests.clear()
    await collect(engine, "and then?", key="copy")
    assert [m["role"] for m in model.requests[0].messages] == [
        "user", "assistant", "tool", "assistant", "user"
    ]  # fmt: skip
