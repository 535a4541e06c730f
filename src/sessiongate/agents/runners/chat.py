"""The `chat` runner: the native function-calling loop.

Model → tool calls (run by agents/tool_steps.py) → results back → model … until the model
answers in text. Rules that end the loop, each with nothing lost:
- `max_tool_steps` model steps asked for tools: one last call is made with the tools
  still described but `tool_choice = "none"` (providers reject a thread holding tool
  calls when no tools are declared), and its text is the answer.
- The model asks for exactly the same calls (names and arguments) three steps in a row:
  it is looping; the last call is made the same way.
- Tool calls a model makes when it was told not to are ignored (its text is kept).
- `[limits]`: arguments over `max_tool_argument_chars` and calls past
  `max_tool_calls_per_step` are answered with error results, not run (tool_steps.py).
- A model that fails after output, a cancellation or `turn_timeout` keeps the text so far
  as an `interrupted` assistant message; calls cut short are kept as `interrupted`
  results (tool_steps.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from sessiongate.agents.registry import ToolRegistry
from sessiongate.agents.tool_steps import (
    StepCall,
    ToolLimits,
    limited_call,
    result_wire,
    run_calls,
)
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.core.events import EndEvent
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.models.base import ModelOptions, ReplyModel, ToolCallChunk, Usage
from sessiongate.service.turn.agent_runtime import AgentTurn
from sessiongate.service.turn.model_steps import StepCut, StepResult, stream_step

#: The same calls this many steps in a row end the loop.
LOOP_REPEATS = 3


def call_records(
    calls: list[ToolCallChunk], turn_id: str, step: int, limits: ToolLimits
) -> list[StepCall]:
    """The calls with ids every provider accepts (a missing or repeated id gets one made
    from the turn and step, so each result answers exactly one call), within `limits`:
    only the first `limits.max_kept_calls` are kept at all (tool_steps.py)."""
    seen: set[str] = set()
    records = []
    for index, call in enumerate(calls[: limits.max_kept_calls], start=1):
        call_id = call.call_id
        if not call_id or call_id in seen or len(call_id) > 64:
            call_id = f"call_{turn_id[-12:]}_{step}_{index}"
        seen.add(call_id)
        size = len(call.arguments) if call.argument_chars is None else call.argument_chars
        records.append(limited_call(call_id, call.name, call.arguments, size, index, limits))
    return records


def add_usage(total: Usage, more: Usage) -> Usage:
    """The turn's usage so far with one more call's (estimated when any call's was)."""
    return total + more


async def keep_cut(turn: AgentTurn, cut: StepCut) -> None:
    """Keep the text a failed or cancelled step streamed, then re-raise what ended it."""
    turn.handle.status = "interrupted"
    await turn.append(
        Role.ASSISTANT,
        cut.reply.text(),
        cut.kept_metadata(turn.handle.turn_id),
        MessageStatus.INTERRUPTED,
    )
    if cut.error is None:
        raise asyncio.CancelledError from cut
    raise cut.error from None


async def finish(turn: AgentTurn, step: StepResult, usage: Usage, extra: dict[str, Any]) -> None:
    """Keep the answer and end the turn."""
    context = turn.context
    metadata: dict[str, Any] = {
        "turn_id": turn.handle.turn_id,
        "model": step.model,
        "usage": usage.to_dict(),
        "context": {
            "messages": len(context.messages),
            "tokens": context.token_estimate,
            "dropped": context.dropped_messages,
        },
        **extra,
        **step.model_marks(),
    }
    if step.reply.full:
        metadata["truncated"] = True
    message = await turn.append(Role.ASSISTANT, step.text, metadata)
    status = "truncated" if step.reply.full or step.stop == "length" else "complete"
    turn.handle.emit(EndEvent(message.message_id, message.seq, usage.to_dict(), status))


async def run_chat(
    turn: AgentTurn,
    models: Mapping[str, ReplyModel],
    tools: Mapping[str, Tool],
    tool_context: ToolContext,
    *,
    native_tools: bool,
    limits: ToolLimits,
) -> None:
    agent = turn.agent
    specs = ToolRegistry.specs(tools) if native_tools else ()
    # Earlier tool steps go to the model natively only alongside a tool list: a provider
    # may reject `tool_calls` in a request that offers no tools (Anthropic does), and this
    # caller may be offered none (tools_non_primary), so then they go inline as text.
    wire: list[dict[str, Any]] = turn.context.to_wire(inline_tool_steps=not specs)
    usage = Usage()
    steps = 0
    signatures: list[tuple[tuple[str, str], ...]] = []
    while True:
        looping = len(signatures) >= LOOP_REPEATS and len(set(signatures[-LOOP_REPEATS:])) == 1
        may_call = bool(specs) and steps < agent.max_tool_steps and not looping
        # Every request carries the argument limit: the adapters keep no more of a call's
        # arguments than that, even of calls that are then ignored.
        bound = limits.max_argument_chars
        if may_call:
            options = ModelOptions(tools=specs, tool_choice="auto", max_tool_argument_chars=bound)
        elif specs and steps:
            options = ModelOptions(tools=specs, tool_choice="none", max_tool_argument_chars=bound)
        else:
            options = ModelOptions(max_tool_argument_chars=bound)
        try:
            step = await stream_step(
                models,
                turn.model_names,
                wire,
                turn.handle,
                max_reply_chars=turn.max_reply_chars,
                options=options,
            )
        except StepCut as cut:
            await keep_cut(turn, cut)
            return
        usage = add_usage(usage, step.usage)
        if not (may_call and step.calls):
            if looping:
                ended_by = "loop"
            elif steps and steps >= agent.max_tool_steps:
                ended_by = "max_tool_steps"
            else:
                ended_by = "answer"
            await finish(turn, step, usage, {"tool_steps": steps, "ended_by": ended_by})
            return
        steps += 1
        calls = call_records(step.calls, turn.handle.turn_id, steps, limits)
        kept: dict[str, Any] = {
            "turn_id": turn.handle.turn_id,
            "model": step.model,
            "step": steps,
            "tool_calls": [c.to_metadata() for c in calls],
        }
        if len(step.calls) > len(calls):
            kept["dropped_tool_calls"] = len(step.calls) - len(calls)
        if step.reasoning:
            kept["reasoning"] = step.reasoning
        await turn.append(Role.ASSISTANT, step.text, kept)
        asked: dict[str, Any] = {
            "role": "assistant",
            "content": step.text,
            "tool_calls": [c.to_wire() for c in calls],
        }
        if step.reasoning:  # signed thinking goes back to the upstream (models/base.py)
            asked["reasoning"] = step.reasoning
        wire.append(asked)
        results = await run_calls(turn, tools, calls, tool_context)
        wire.extend(result_wire(r, agent.max_tool_result_chars) for r in results)
        signatures.append(tuple(sorted((c.record.name, c.record.arguments) for c in calls)))
