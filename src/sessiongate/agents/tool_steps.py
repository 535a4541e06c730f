"""Running one step's tool calls: events, concurrency, limits and what is kept.

Each call gets a `tool_start` event, runs (at most `max_parallel_tools` at once, each
within `tool_timeout`), and as soon as it ends its result is appended as a `tool` message
and a `tool_end` event follows. If the step is cancelled (turn timeout, shutdown), the
calls still running are stopped and each is kept as an `interrupted` result, so the thread
stays valid and nothing that finished is lost.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from typing import Any

from sessiongate.agents.registry import ToolRegistry, ToolResult
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.core.events import ToolEndEvent, ToolStartEvent
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.core.tool_calls import INTERRUPTED_RESULT, ToolCallRecord, cap_result
from sessiongate.service.agent_turn import AgentTurn


def shown_input(raw: str) -> dict[str, Any] | str:
    """The arguments as the `tool_start` event shows them: the object when it parses."""
    try:
        value = json.loads(raw or "{}")
    except (json.JSONDecodeError, RecursionError):
        return raw
    return value if isinstance(value, dict) else raw


async def run_calls(
    turn: AgentTurn,
    tools: Mapping[str, Tool],
    calls: Sequence[ToolCallRecord],
    context: ToolContext,
) -> list[ToolResult]:
    """Run `calls`; return their results in call order (each already kept)."""
    agent = turn.agent
    handle = turn.handle
    limit = agent.tool_timeout.total_seconds()
    gate = asyncio.Semaphore(agent.max_parallel_tools)
    kept: dict[str, ToolResult] = {}

    async def one(call: ToolCallRecord) -> None:
        async with gate:
            result = await ToolRegistry.call(
                tools, call.call_id, call.name, call.arguments, context, limit_seconds=limit
            )
        await _keep(turn, result)
        kept[call.call_id] = result

    for call in calls:
        handle.emit(ToolStartEvent(call.call_id, call.name, shown_input(call.arguments)))
    tasks = [asyncio.create_task(one(call)) for call in calls]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for call in calls:
            if call.call_id not in kept:
                result = ToolResult(call.call_id, call.name, "interrupted", INTERRUPTED_RESULT, 0)
                await _keep(turn, result)
                kept[call.call_id] = result
        raise
    return [kept[call.call_id] for call in calls]


async def _keep(turn: AgentTurn, result: ToolResult) -> None:
    metadata: dict[str, Any] = {
        "turn_id": turn.handle.turn_id,
        "tool_call_id": result.call_id,
        "name": result.name,
        "status": result.status,
        "duration_ms": result.duration_ms,
    }
    if result.artifact_ids:
        metadata["artifact_ids"] = list(result.artifact_ids)
    if result.data:
        metadata["data"] = result.data
    status = MessageStatus.INTERRUPTED if result.status == "interrupted" else MessageStatus.COMPLETE
    await turn.append(Role.TOOL, result.content, metadata, status)
    shown = cap_result(result.content, turn.agent.max_tool_result_chars)
    turn.handle.emit(
        ToolEndEvent(result.call_id, result.name, shown, result.status, result.duration_ms)
    )


def result_wire(result: ToolResult, max_chars: int) -> dict[str, Any]:
    """A result as the next model call sees it (capped)."""
    return {
        "role": "tool",
        "tool_call_id": result.call_id,
        "name": result.name,
        "content": cap_result(result.content, max_chars),
        "status": result.status,
    }
