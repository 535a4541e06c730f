"""A Responses API turn whose client offered hosted tools (`web_search`) that the agent
runs as one of its own (`[agents.<name>] hosted_tools`), beside the client's function
tools (DESIGN.md §14).

The model is offered the client's tools and each hosted tool under its hosted name, with
the equivalent tool's description and parameters. A step that calls only hosted tools is
run here, as the chat runner runs the agent's tools (kept as tool steps, `tool_start` /
`tool_end` events, which the Responses API shows as `web_search_call` items), and the
model is asked again; a step that calls any of the client's tools ends the turn with those
calls for the client to run (hosted calls in the same step are left out: the client
answers only its own), as does an answer. After `max_tool_steps` hosted steps the last
call offers only the client's tools.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sessiongate.agents.runners.chat import call_records, keep_cut
from sessiongate.agents.tool_steps import ToolLimits, result_wire, run_calls
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.core.events import EndEvent
from sessiongate.core.segments import Role
from sessiongate.models.base import ModelOptions, ReplyModel, Usage
from sessiongate.service.turn.agent_runtime import AgentTurn
from sessiongate.service.turn.client_reply import CLIENT_TOOLS, client_call_records
from sessiongate.service.turn.model_steps import StepCut, stream_step
from sessiongate.service.turn.plain_reply import reply_metadata

#: Assistant-message metadata: the hosted tool types its calls stood for.
HOSTED = "hosted_tools"


async def run_hosted(
    turn: AgentTurn,
    models: Mapping[str, ReplyModel],
    hosted: Mapping[str, Tool],
    tool_context: ToolContext,
    options: ModelOptions,
    limits: ToolLimits,
) -> None:
    """`hosted`: hosted tool type → the agent's tool run in its place."""
    specs = tuple(replace(tool.spec, name=kind) for kind, tool in hosted.items())
    bound = limits.max_argument_chars
    offered = replace(options, tools=(*options.tools, *specs), max_tool_argument_chars=bound)
    client_only = replace(options, max_tool_argument_chars=bound)
    if not options.tools:
        client_only = replace(client_only, tool_choice=None)
    wire: list[dict[str, Any]] = turn.context.to_wire()
    usage = Usage()
    steps = 0
    handle = turn.handle
    while True:
        may_call = steps < turn.agent.max_tool_steps
        try:
            step = await stream_step(
                models,
                turn.model_names,
                wire,
                handle,
                max_reply_chars=turn.max_reply_chars,
                options=offered if may_call else client_only,
            )
        except StepCut as cut:
            await keep_cut(turn, cut)
            return
        usage = usage + step.usage
        server = [c for c in step.calls if c.name in hosted]
        client = [c for c in step.calls if c.name not in hosted]
        if server and not client and may_call:
            steps += 1
            calls = call_records(server, handle.turn_id, steps, limits)
            kept: dict[str, Any] = {
                "turn_id": handle.turn_id,
                "model": step.model,
                "step": steps,
                "tool_calls": [c.to_metadata() for c in calls],
                HOSTED: sorted({c.record.name for c in calls}),
            }
            if step.reasoning:
                kept["reasoning"] = step.reasoning
            await turn.append(Role.ASSISTANT, step.text, kept)
            asked: dict[str, Any] = {
                "role": "assistant",
                "content": step.text,
                "tool_calls": [c.to_wire() for c in calls],
            }
            if step.reasoning:
                asked["reasoning"] = step.reasoning
            wire.append(asked)
            results = await run_calls(turn, hosted, calls, tool_context)
            wire.extend(result_wire(r, turn.agent.max_tool_result_chars) for r in results)
            continue
        metadata = reply_metadata(handle, step, turn.context)
        metadata["usage"] = usage.to_dict()
        metadata["tool_steps"] = steps
        if step.reply.full:
            metadata["truncated"] = True
        if client and options.tools:
            records = client_call_records(client, handle.turn_id)
            metadata["tool_calls"] = [r.to_metadata() for r in records]
            metadata[CLIENT_TOOLS] = True
            handle.tool_calls = [r.to_metadata() for r in records]
        if server and client:
            metadata["hosted_calls_left_out"] = len(server)
        message = await turn.append(Role.ASSISTANT, step.text, metadata)
        status = "truncated" if step.reply.full or step.stop == "length" else "complete"
        handle.emit(EndEvent(message.message_id, message.seq, usage.to_dict(), status))
        return
