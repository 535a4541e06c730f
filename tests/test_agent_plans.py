"""The `plan_execute` runner (seed 002), `POST /chat`, and `GET /v1/tools` over real HTTP."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.plans import InvalidPlan, parse_plan
from sessiongate.core.segments import Role
from sessiongate.models.base import ModelOptions, ToolSpec, WireMessage
from sessiongate.service.engine import build_engine
from tests.conftest import make_settings
from tests.support.agent_models import ToolModel, toolbox
from tests.support.gateway import gateway_settings, running_gateway
from tests.support.helpers import collect, types

PLAN = {
    "plan": [
        {"step": 1, "tool": "add", "tool_input": {"a": 20, "b": 22}},
        {"step": 2, "tool": "echo", "tool_input": {"text": "marathon"}},
        {"step": 3, "tool": None, "description": "Synthesize"},
    ]
}
SPECS = {
    "add": ToolSpec(
        "add",
        "Add.",
        {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    )
}


def explain(messages: Sequence[WireMessage], options: ModelOptions) -> str:
    content: str = messages[-1]["content"]
    return "answer from: " + content.replace("\n", " | ")


def test_plan_parsing_accepts_fences_and_names_each_problem() -> None:
    fenced = "```json\n" + json.dumps({"plan": [PLAN["plan"][0]]}) + "\n```"
    assert parse_plan(fenced, SPECS, max_steps=3)[0].tool_input == {"a": 20, "b": 22}
    cases = {
        "not json": "not one JSON object",
        json.dumps({"steps": []}): '"plan" list',
        json.dumps({"plan": []}): "no steps",
        json.dumps({"plan": [{"step": 2, "tool": None}]}): "numbered",
        json.dumps({"plan": [{"step": 1, "tool": "rm"}]}): "unknown tool 'rm'",
        json.dumps({"plan": [{"step": 1, "tool": "add", "tool_input": {"a": 1}}]}): "'b'",
        json.dumps({"plan": [{"step": i, "tool": None} for i in range(1, 6)]}): "at most 3",
    }
    for text, problem in cases.items():
        with pytest.raises(InvalidPlan, match=problem):
            parse_plan(text, SPECS, max_steps=3)


async def test_planner_worker_explainer_in_two_model_calls(
    tmp_path: Path, clock: ManualClock, database_url: str
) -> None:
    model = ToolModel(json.dumps(PLAN), explain, repeat_last=False)
    engine = build_engine(
        make_settings(
            tmp_path,
            {"main": {"model": model.name, "runner": "plan_execute", "tools": ["add", "echo"]}},
            database_url=database_url,
        ),
        clock=clock,
        models={model.name: model},
    )
    engine.tools.add_source(toolbox())
    await engine.start()
    try:
        events = await collect(engine, "What's in my notes about running?")
        kinds = types(events)
        assert kinds[:8] == [
            "start", "plan", "tool_start", "tool_end", "tool_start", "tool_end",
            "context_log", "token",
        ]  # fmt: skip
        assert kinds[-1] == "end" and len(model.requests) == 2
        plan = next(e for e in events if e.type == "plan").plan
        assert plan[2] == {"step": 3, "tool": None, "description": "Synthesize"}
        log = next(e for e in events if e.type == "context_log").log
        assert log == [
            {"step": 1, "action": 'add({"a": 20, "b": 22})', "result": "42"},
            {"step": 2, "action": 'echo({"text": "marathon"})', "result": "alice:marathon"},
            {"step": 3, "action": "Synthesize", "result": "Reasoning/synthesis step completed"},
        ]
        # The planner got the tools and their schemas, and JSON mode; no tokens streamed.
        planner = model.requests[0]
        assert (
            "add:" in planner.messages[0]["content"]
            and '"required"' in planner.messages[0]["content"]
        )
        assert planner.options.response_format == {"type": "json_object"}
        reply = "".join(e.content for e in events if e.type == "token")
        assert reply.startswith("answer from: User request: What's in my notes about running?")
        assert "Result: 42" in reply and "Step 3: Synthesize" in reply
        latest = await engine.store.latest_segment(KeyRef("alice", "chat:alice"))
        stored = await engine.store.list_messages(latest.session_id)
        assert [m.role for m in stored] == [
            Role.USER, Role.ASSISTANT, Role.TOOL, Role.TOOL, Role.ASSISTANT
        ]  # fmt: skip
        assert stored[-1].metadata["plan"] == plan and stored[-1].metadata["context_log"] == log
    finally:
        await engine.aclose()


async def test_an_invalid_plan_is_repaired_once_then_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    bad = json.dumps({"plan": [{"step": 1, "tool": "format_disk"}]})
    repaired = ToolModel(bad, json.dumps(PLAN), explain)
    hopeless = ToolModel(bad, name="hopeless")
    engine = build_engine(
        make_settings(
            tmp_path,
            {
                "main": {"model": repaired.name, "runner": "plan_execute", "tools": ["*"]},
                "other": {
                    "model": "hopeless",
                    "runner": "plan_execute",
                    "tools": ["*"],
                    "users": ["*"],  # named by a user no route sends to it
                },
            },
        ),
        clock=clock,
        models={repaired.name: repaired, "hopeless": hopeless},
    )
    engine.tools.add_source(toolbox())
    try:
        events = await collect(engine, "plan it")
        assert types(events)[-1] == "end" and len(repaired.requests) == 3
        assert "unknown tool 'format_disk'" in repaired.requests[1].messages[-1]["content"]

        events = await collect(engine, "plan it", key="chat:other", agent="other")
        assert events[-1].type == "error" and events[-1].code == "invalid_plan"
        assert events[-1].status == 422 and len(hopeless.requests) == 2
        latest = await engine.store.latest_segment(KeyRef("alice", "chat:other"))
        assert [m.role for m in await engine.store.list_messages(latest.session_id)] == [Role.USER]
    finally:
        await engine.aclose()


def test_seed_002_chat_endpoint_and_the_tools_listing(tmp_path: Path) -> None:
    model = ToolModel(json.dumps(PLAN), explain)
    # The other provider plans too (the runner asks the turn's reply model), and explains
    # in words of its own: which model answered shows in the reply.
    other = ToolModel(
        json.dumps(PLAN), lambda messages, options: "from the other provider", name="ollama"
    )
    settings = gateway_settings(
        tmp_path,
        agents={
            "main": {
                "model": model.name,
                "runner": "plan_execute",
                "tools": ["add", "echo", "fail"],
                "tools_non_primary": ["echo"],
            }
        },
        compat={"providers": {"openai": model.name, "ollama": "ollama"}},
    )
    with running_gateway(settings, {model.name: model, "ollama": other}) as gw:
        gw.engine.tools.add_source(toolbox())
        with httpx.Client(base_url=gw.url, timeout=10) as client:
            body = {"messages": [{"role": "user", "content": "running?"}], "provider": "openai"}
            answer = client.post("/chat", json=body, headers=gw.auth("prime"))
            assert answer.status_code == 200
            assert answer.headers["content-type"].startswith("text/event-stream")
            data = [
                json.loads(line[6:])
                for line in answer.text.splitlines()
                if line.startswith("data: ")
            ]
            assert "event:" not in answer.text  # seed 002's page reads data lines only
            assert [d["type"] for d in data][:2] == ["start", "plan"]
            assert data[-1]["type"] == "end" and answer.headers["x-session-key"] == "lifehub:prime"
            assert {d["name"] for d in data if d["type"] == "tool_start"} == {"add", "echo"}
            reply = "".join(d["content"] for d in data if d["type"] == "token")
            assert reply.startswith("answer from:"), reply
            assert len(model.requests) == 2 and other.requests == []

            # `provider` switches this turn's reply model: the other one plans and answers.
            body["provider"] = "ollama"
            switched = client.post("/chat", json=body, headers=gw.auth("prime"))
            assert switched.status_code == 200, switched.text
            data = [
                json.loads(line[6:])
                for line in switched.text.splitlines()
                if line.startswith("data: ")
            ]
            assert data[-1]["type"] == "end", data[-1]
            reply = "".join(d["content"] for d in data if d["type"] == "token")
            assert reply.strip() == "from the other provider", reply
            assert len(other.requests) == 2 and len(model.requests) == 2

            body["provider"] = "nope"
            refused = client.post("/chat", json=body, headers=gw.auth("alice"))
            assert refused.status_code == 400
            assert refused.json()["error"]["code"] == "unknown_provider"
            refused = client.post(
                "/chat",
                json={"messages": [{"role": "assistant", "content": "x"}]},
                headers=gw.auth("alice"),
            )
            assert refused.status_code == 400

            listed: dict[str, Any] = client.get(
                "/v1/tools", params={"agent": "main"}, headers=gw.auth("prime")
            ).json()
            assert [t["name"] for t in listed["tools"]] == ["add", "echo", "fail"]
            assert listed["tools"][0]["parameters"]["required"] == ["a", "b"]
            assert listed["tools"][0]["source"] == "builtin"
            mine = client.get("/v1/tools", params={"agent": "main"}, headers=gw.auth("alice"))
            assert [t["name"] for t in mine.json()["tools"]] == ["echo"]
            missing = client.get("/v1/tools", params={"agent": "ghost"}, headers=gw.auth("alice"))
            assert missing.status_code == 403
            assert missing.json()["error"]["code"] == "agent_not_allowed"
            assert client.get("/v1/tools").status_code == 401
