"""The sessiongate gateway of agent_turns.py, run as its own process
(`agent_turns.py --role gateway`), served the way `sessiongate serve` serves it.

A configuration file cannot name arbitrary Python functions as tools, so this helper does
what the agent runtime's tests do (tests/test_agent_runtime.py): it builds the engine from
settings with `build_engine`, then adds the two in-process tools with
`engine.tools.add_source(StaticToolSource(...))` holding `FunctionTool`s. The rest is the
product as configured by a user:

* `[models.stub]`: provider `openai` (the official SDK adapter) at the stub's `/v1`;
* `[agents.main]`: the default `chat` runner with `tools = ["lookup", "add"]`;
* `[agents.plan]`: `runner = "plan_execute"` with the same tools;
* SQLite in a temporary directory, one primary user created before start;
  `limits.max_body_bytes` raised to 64 MiB so a long history can be imported in one request;
* `create_app(engine)` under uvicorn (uvloop + httptools) on 127.0.0.1, access log off, the
  heap frozen after start-up, as `sessiongate serve` does (stacks.py's uvicorn settings);
  `--profile-out` runs it under cProfile with a CPU clock (procs.run_server).

`--gateway-model inprocess` is a diagnostic: the reply model is `InProcessAgentModel`, the
stub's answers made in-process with no HTTP call, so CPU per turn shows sessiongate's own
work without the upstream client's (the `openai` SDK's request building, aiohttp).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any, ClassVar

from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext
from sessiongate.config import Settings
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelCapabilities,
    ModelChunk,
    ModelOptions,
    TextDelta,
    ToolCallChunk,
    ToolSpec,
    Usage,
    WireMessage,
)
from sessiongate.service.engine import Engine, build_engine
from support.agent_peers import ADD_DOC, INSTRUCTIONS, LOOKUP_DOC, add_value, lookup_value
from support.agent_stub import answer_tokens, plan_texts, reply_kind, tool_calls
from support.common import run_async
from support.procs import listening_socket, run_server, write_ready
from support.stacks import _uvicorn_config
from support.stub import STUB_MODEL

GATEWAY_USER = "bench"
TOOL_NAMES = ["lookup", "add"]


def bench_tool_source() -> StaticToolSource:
    """The two in-process tools, as sessiongate's own `FunctionTool`s."""

    async def lookup(arguments: dict[str, Any], context: ToolContext) -> str:
        return lookup_value(arguments["key"])

    async def add(arguments: dict[str, Any], context: ToolContext) -> str:
        return add_value(arguments["a"], arguments["b"])

    integer = {"type": "integer"}
    lookup_schema = {
        "type": "object",
        "properties": {"key": {"type": "string"}},
        "required": ["key"],
    }
    add_schema = {
        "type": "object",
        "properties": {"a": integer, "b": integer},
        "required": ["a", "b"],
    }
    tools = [
        FunctionTool(ToolSpec("lookup", LOOKUP_DOC, lookup_schema), lookup),
        FunctionTool(ToolSpec("add", ADD_DOC, add_schema), add),
    ]
    return StaticToolSource("bench", tools)


class InProcessAgentModel:
    """Diagnostic only: the stub's replies (agent_stub.py) without any I/O, as a
    `ReplyModel` that calls tools."""

    capabilities: ClassVar[ModelCapabilities] = ModelCapabilities(tools=True, json_output=True)

    def __init__(self, name: str) -> None:
        self.name = name
        self.replies = 0

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.replies += 1
        request = {
            "messages": list(messages),
            "tools": [tool.name for tool in options.tools],
            "tool_choice": options.tool_choice,
            "response_format": options.response_format,
        }
        kind = reply_kind(request)
        if kind == "tools":
            for call in tool_calls(self.replies):
                yield ToolCallChunk(call["id"], call["name"], call["arguments"])
        else:
            for text in plan_texts() if kind == "plan" else answer_tokens(request):
                yield TextDelta(text)
        yield Usage(len(messages) * 20, 20)


def build_agent_gateway(stub_url: str, data_dir: Path, diagnostic: bool) -> tuple[Engine, str]:
    """(engine with the tools added, the bench user's API key)."""

    model = {"provider": "openai", "base_url": f"{stub_url}/v1", "model": STUB_MODEL}
    agent = {"tools": TOOL_NAMES, "system_prompt": INSTRUCTIONS}
    settings = Settings(
        data_dir=data_dir,
        lifecycle={"timezone": "UTC"},
        # Room for the import of a 1,000-turn history (agent_client.seed_histories).
        limits={"max_body_bytes": 64 * 1024 * 1024},
        models={"stub": model},
        agents={
            "defaults": {"model": "stub"},
            "main": agent,
            "plan": {**agent, "runner": "plan_execute"},
        },
    )
    models: dict[str, Any] = {}
    if diagnostic:
        models["stub"] = InProcessAgentModel("stub")
    engine = build_engine(settings, models=models)
    engine.tools.add_source(bench_tool_source())
    _, key = run_async(engine.users.add(GATEWAY_USER, primary=True))
    return engine, key


def serve_agent_gateway(args: argparse.Namespace) -> None:
    import uvicorn

    from sessiongate.api.app import create_app
    from sessiongate.serving import freeze_heap

    engine, key = build_agent_gateway(
        args.stub_url, Path(args.data_dir), args.gateway_model == "inprocess"
    )
    sock = listening_socket()
    server = uvicorn.Server(_uvicorn_config(create_app(engine), False))
    freeze_heap()  # as `sessiongate serve` does
    write_ready(args.ready_file, {"port": sock.getsockname()[1], "api_key": key})
    run_server(server, sock, args.profile_out)
