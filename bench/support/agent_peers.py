"""The two peers of agent_turns.py, each driven as its documentation shows, in a process of
its own (`agent_turns.py --role langgraph|agents`), against the same stub and tools:

* **LangGraph**: `langgraph.prebuilt.create_react_agent` with `ChatOpenAI` (langchain-openai,
  `streaming=True`, `base_url` = the stub) and the two tools as async `@tool` functions,
  checkpointed by `AsyncSqliteSaver` (langgraph-checkpoint-sqlite) in one SQLite file; one
  turn is `agent.astream({"messages": [user]}, {"configurable": {"thread_id": key}},
  stream_mode="messages")`, the answer's text taken from the streamed `AIMessageChunk`s.
* **OpenAI Agents SDK**: an `Agent` on `OpenAIChatCompletionsModel` (an `AsyncOpenAI`
  client with `base_url` = the stub) with the two tools as async `@function_tool`s, one
  `SQLiteSession(key, file)` per key (all in one file), and one turn is
  `Runner.run_streamed(agent, text, session=session)` with its events read to the end
  (the text from `ResponseTextDeltaEvent`s). Tracing is off (`set_tracing_disabled`), as
  for any model server that is not OpenAI's: its exporter would post every trace there.

Both are libraries called in-process: no HTTP server, authentication or SSE encoding in
front of them, which the gateway pays for and they do not.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from collections.abc import AsyncIterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from support.agent_load import Phase, TurnFn, closed_loop, process_cpu_clock, stub_requests
from support.agent_stub import LOOKUP
from support.common import run_async
from support.stub import STUB_MODEL

INSTRUCTIONS = "You are a helpful assistant. Use the tools when they help."
LOOKUP_DOC = "Look up the number stored under a key."
ADD_DOC = "Add two integers."


def lookup_value(key: str) -> str:
    return f"{key}={LOOKUP.get(key, 0)}"


def add_value(a: int, b: int) -> str:
    return f"sum={a + b}"


@contextlib.asynccontextmanager
async def langgraph_stack(stub_url: str, db_path: Path) -> AsyncIterator[TurnFn]:
    from langchain_core.messages import AIMessageChunk
    from langchain_core.tools import tool
    from langchain_openai import ChatOpenAI
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
    from langgraph.prebuilt import create_react_agent

    @tool(description=LOOKUP_DOC)
    async def lookup(key: str) -> str:
        return lookup_value(key)

    @tool(description=ADD_DOC)
    async def add(a: int, b: int) -> str:
        return add_value(a, b)

    model = ChatOpenAI(
        model=STUB_MODEL,
        base_url=f"{stub_url}/v1",
        api_key=lambda: "bench",
        streaming=True,
        stream_usage=True,
        max_retries=0,
    )
    async with AsyncSqliteSaver.from_conn_string(str(db_path)) as saver:
        agent = create_react_agent(model, [lookup, add], prompt=INSTRUCTIONS, checkpointer=saver)

        async def turn(key: str, content: str) -> str:
            parts: list[str] = []
            config: Any = {"configurable": {"thread_id": key}}
            request: Any = {"messages": [{"role": "user", "content": content}]}
            async for chunk, _meta in agent.astream(request, config, stream_mode="messages"):
                if isinstance(chunk, AIMessageChunk) and isinstance(chunk.content, str):
                    parts.append(chunk.content)
            return "".join(parts)

        yield turn


@contextlib.asynccontextmanager
async def agents_stack(stub_url: str, db_path: Path) -> AsyncIterator[TurnFn]:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        SQLiteSession,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI
    from openai.types.responses import ResponseTextDeltaEvent

    set_tracing_disabled(True)

    @function_tool(description_override=LOOKUP_DOC)
    async def lookup(key: str) -> str:
        return lookup_value(key)

    @function_tool(description_override=ADD_DOC)
    async def add(a: int, b: int) -> str:
        return add_value(a, b)

    client = AsyncOpenAI(base_url=f"{stub_url}/v1", api_key="bench", max_retries=0)
    agent: Any = Agent(
        name="bench",
        instructions=INSTRUCTIONS,
        model=OpenAIChatCompletionsModel(model=STUB_MODEL, openai_client=client),
        tools=[lookup, add],
    )
    sessions: dict[str, Any] = {}

    async def turn(key: str, content: str) -> str:
        session = sessions.get(key)
        if session is None:
            session = sessions[key] = SQLiteSession(key, str(db_path))
        result = Runner.run_streamed(agent, content, session=session)
        parts: list[str] = []
        async for event in result.stream_events():
            if event.type == "raw_response_event" and isinstance(
                event.data, ResponseTextDeltaEvent
            ):
                parts.append(event.data.delta)
        return "".join(parts)

    try:
        yield turn
    finally:
        for session in sessions.values():
            session.close()
        await client.close()


#: Untimed turns per session on other keys before the timed loop (as for the gateway).
WARM_TURNS = 2
STACKS = {"langgraph": langgraph_stack, "agents": agents_stack}


def run_peer(args: argparse.Namespace) -> None:
    """The child process: one closed loop on this peer; its Phase as JSON."""
    stub_pid = int(args.stub_pid)

    def cpu() -> dict[str, float]:
        return {
            "peer": time.process_time(),
            "stub": process_cpu_clock(stub_pid),
            "model_calls": stub_requests(args.stub_url),
        }

    async def main() -> Phase:
        phase = Phase(args.role, args.sessions, args.turns)
        db_path = Path(args.data_dir) / f"{args.role}.db"
        async with STACKS[args.role](args.stub_url, db_path) as turn:
            # Warm the process up on other keys first, as agent_turns.py does the gateway.
            warm = Phase(args.role, args.sessions, WARM_TURNS)
            await closed_loop(turn, warm, f"{args.label}-warm", cpu, tools=True)
            return await closed_loop(turn, phase, args.label, cpu, tools=not args.no_tools)

    phase = run_async(main())
    Path(args.result_file).write_text(json.dumps(asdict(phase)))
