"""Running one step's tool calls: events, concurrency, limits and what is kept.

Each call gets a `tool_start` event, runs (at most `max_parallel_tools` at once, each
within `tool_timeout`), and as soon as it ends its result is appended as a `tool` message
and a `tool_end` event follows. If the step is cancelled (turn timeout, shutdown), the
calls still running are stopped and each is kept as an `interrupted` result, so the thread
stays valid and nothing that finished is lost.

`[limits]` bound what one step may ask (`ToolLimits`). A call whose arguments are longer
than `max_tool_argument_chars` is not run: it is answered with an `error` result saying
so, and from then on only a head of its arguments exists (in `tool_start`, the stored
assistant message, the replay journal and every later context), marked
`arguments_truncated` with the real length in the call's metadata; otherwise megabytes of
arguments would be resent to the model on every later turn. Calls past
`max_tool_calls_per_step` in one step are answered with an `error` result too, not run:
every call still has its result, so the history stays valid. Past those, at most
`MAX_REFUSED_CALLS` more are answered; a step asking for even more (a model that asked
for 20,000 calls would otherwise leave 20,000 results in the thread, resent every turn)
keeps only the first ones, and the assistant message says how many were dropped
(`dropped_tool_calls`): a dropped call is in no message, so it needs no result.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiongate.agents.registry import ToolRegistry, ToolResult
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.config.limits import LimitsConfig
from sessiongate.core.events import ToolEndEvent, ToolStartEvent
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.core.tool_calls import INTERRUPTED_RESULT, ToolCallRecord, cap_result
from sessiongate.service.turn.agent_runtime import AgentTurn

#: What is kept of arguments too large to run: enough for the model and a reader to see
#: what the call was, small enough that resending it on every later turn costs nothing.
CUT_ARGUMENTS_HEAD_CHARS = 1_000
#: Calls past `max_tool_calls_per_step` that are still answered (with a refusal) before
#: the rest of a runaway step is dropped unseen.
MAX_REFUSED_CALLS = 32


@dataclass(frozen=True, slots=True)
class ToolLimits:
    """What one model step's calls may be (`[limits]`)."""

    max_argument_chars: int
    max_calls_per_step: int

    @classmethod
    def from_config(cls, limits: LimitsConfig) -> ToolLimits:
        return cls(limits.max_tool_argument_chars, limits.max_tool_calls_per_step)

    @property
    def max_kept_calls(self) -> int:
        """The most calls of one step that are kept at all (run or refused)."""
        return self.max_calls_per_step + MAX_REFUSED_CALLS


@dataclass(frozen=True, slots=True)
class StepCall:
    """One call of a step as it is shown, kept and sent back to the model: `record`
    holds only a head of arguments that were too large, and `refusal` is the error
    result of a call that is not run (None: it runs)."""

    record: ToolCallRecord
    refusal: str | None = None
    #: The arguments' real length when `record.arguments` is only their head.
    argument_chars: int | None = None

    def to_metadata(self) -> dict[str, Any]:
        """The call as the assistant message's `tool_calls` metadata keeps it."""
        kept: dict[str, Any] = dict(self.record.to_metadata())
        if self.argument_chars is not None:
            kept["arguments_truncated"] = True
            kept["argument_chars"] = self.argument_chars
        return kept

    def to_wire(self) -> dict[str, str]:
        record = self.record
        return {"id": record.call_id, "name": record.name, "arguments": record.arguments}


def limited_call(
    call_id: str, name: str, arguments: str, argument_chars: int, position: int, limits: ToolLimits
) -> StepCall:
    """The call at `position` (from 1) of its step, its arguments `argument_chars` long
    (of which `arguments` may hold only a head), within `limits`."""
    refusal: str | None = None
    cut: int | None = None
    if argument_chars > limits.max_argument_chars:
        arguments = arguments[: min(CUT_ARGUMENTS_HEAD_CHARS, limits.max_argument_chars)]
        cut = argument_chars
        refusal = (
            f"error: the arguments were too large ({argument_chars} characters; at most"
            f" {limits.max_argument_chars} are accepted), so the call was not run"
        )
    if position > limits.max_calls_per_step:
        refusal = f"error: too many tool calls in one step; at most {limits.max_calls_per_step} run"
    return StepCall(ToolCallRecord(call_id, name, arguments), refusal, cut)


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
    calls: Sequence[StepCall],
    context: ToolContext,
) -> list[ToolResult]:
    """Run `calls` (those with a refusal are answered with it instead); return their
    results in call order (each already kept)."""
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

    records = [call.record for call in calls]
    for record in records:
        handle.emit(ToolStartEvent(record.call_id, record.name, shown_input(record.arguments)))
    tasks: list[asyncio.Task[None]] = []
    try:
        # Refusals first and without a task each: a step of thousands of calls past the
        # limit must not cost thousands of tasks.
        for call in calls:
            if call.refusal is not None:
                record = call.record
                result = ToolResult(record.call_id, record.name, "error", call.refusal, 0)
                await _keep(turn, result)
                kept[record.call_id] = result
        tasks = [asyncio.create_task(one(c.record)) for c in calls if c.refusal is None]
        await asyncio.gather(*tasks)
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for record in records:
            if record.call_id not in kept:
                result = ToolResult(
                    record.call_id, record.name, "interrupted", INTERRUPTED_RESULT, 0
                )
                await _keep(turn, result)
                kept[record.call_id] = result
        raise
    return [kept[record.call_id] for record in records]


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
