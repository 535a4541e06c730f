"""The `plan_execute` runner: seed 002's planner → worker → explainer.

1. Planner: one call to `planner_model` (default: the reply model), read whole and never
   forwarded (the adapters stream upstream, as for every call), with the
   tools and their schemas; its JSON plan is validated (core/plans.py, and here each tool
   step's `tool_input` against `limits.max_tool_argument_chars`). An invalid plan
   gets one repair attempt (the problem is sent back); a second invalid plan ends the turn
   with `invalid_plan` (422). A `plan` event follows a valid plan.
2. Worker: the steps in order, no model call. Tool steps run as tool calls (events,
   limits, results kept as `tool` messages after an assistant message holding the plan's
   calls, so the history stays a valid thread); a synthesis step adds its description.
   A `context_log` event carries `[{"step", "action", "result"}]`.
3. Explainer: one streamed call to the reply model with the request, the plan and the log;
   its answer is the assistant message (plan and log in its metadata).
Two model calls per turn (three when a repair was needed).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

from sessiongate.agents.runners.chat import add_usage, finish, keep_cut
from sessiongate.agents.tool_steps import StepCall, ToolLimits, run_calls
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.core.events import ContextLogEvent, PlanEvent
from sessiongate.core.plans import (
    EXPLAINER_INSTRUCTIONS,
    SYNTHESIS_RESULT,
    InvalidPlan,
    PlanStep,
    explainer_request,
    parse_plan,
    planner_prompt,
    repair_prompt,
)
from sessiongate.core.segments import Role
from sessiongate.core.tool_calls import ToolCallRecord, cap_result
from sessiongate.errors import PlanRejected
from sessiongate.models.base import ModelOptions, ReplyModel, Usage, capabilities_of
from sessiongate.service.turn.agent_runtime import AgentTurn
from sessiongate.service.turn.model_steps import StepCut, stream_step


async def run_plan(
    turn: AgentTurn,
    models: Mapping[str, ReplyModel],
    tools: Mapping[str, Tool],
    tool_context: ToolContext,
    limits: ToolLimits,
) -> None:
    agent = turn.agent
    specs = {name: tool.spec for name, tool in tools.items()}
    history = turn.context.to_wire(inline_tool_steps=True)
    planner_names = [agent.planner_model] if agent.planner_model else turn.model_names
    # The thread without the agent's own system text: the planner gets its own.
    thread = [m for m in history if m["role"] != "system"]
    wire: list[dict[str, Any]] = [
        {"role": "system", "content": planner_prompt(list(specs.values()), agent.max_plan_steps)},
        *thread,
    ]
    first = models.get(planner_names[0])
    json_mode = first is not None and capabilities_of(first).json_output
    options = ModelOptions(response_format={"type": "json_object"}) if json_mode else ModelOptions()
    usage = Usage()
    plan: tuple[PlanStep, ...] | None = None
    problem = ""
    for attempt in range(2):
        try:
            step = await stream_step(
                models,
                planner_names,
                wire,
                turn.handle,
                max_reply_chars=turn.max_reply_chars,
                options=options,
                emit_tokens=False,
            )
        except StepCut as cut:  # nothing reached the client: a planner streams nothing
            if cut.error is not None:
                raise cut.error from None
            raise
        usage = add_usage(usage, step.usage)
        try:
            # In a worker thread: it checks each step's input against a tool schema,
            # which may come from an MCP server (bounded, but not free).
            plan = await asyncio.to_thread(
                parse_plan, step.text, specs, max_steps=agent.max_plan_steps
            )
            _check_argument_sizes(plan, limits)
            break
        except InvalidPlan as exc:
            problem = str(exc)
            if attempt == 0:
                wire += [
                    {"role": "assistant", "content": step.text},
                    {"role": "user", "content": repair_prompt(problem)},
                ]
    if plan is None:
        raise PlanRejected(f"the planner's plan was invalid twice: {problem}")
    plan_data = [s.to_dict() for s in plan]
    turn.handle.emit(PlanEvent(plan_data))

    log = await _work(turn, tools, tool_context, plan)
    turn.handle.emit(ContextLogEvent(log))

    system = "\n\n".join(m["content"] for m in history if m["role"] == "system")
    explainer: list[dict[str, Any]] = [
        {"role": "system", "content": (system + "\n\n" if system else "") + EXPLAINER_INSTRUCTIONS},
        *thread[:-1],
        {"role": "user", "content": explainer_request(turn.content, plan, log)},
    ]
    try:
        answer = await stream_step(
            models, turn.model_names, explainer, turn.handle, max_reply_chars=turn.max_reply_chars
        )
    except StepCut as cut:
        await keep_cut(turn, cut)
        return
    usage = add_usage(usage, answer.usage)
    await finish(turn, answer, usage, {"plan": plan_data, "context_log": log})


async def _work(
    turn: AgentTurn,
    tools: Mapping[str, Tool],
    tool_context: ToolContext,
    plan: tuple[PlanStep, ...],
) -> list[dict[str, Any]]:
    """Run the plan's steps in order; the context log."""
    turn_id = turn.handle.turn_id
    calls = {
        s.step: ToolCallRecord(f"plan_{turn_id[-12:]}_{s.step}", s.tool, _json(s.tool_input))
        for s in plan
        if s.tool is not None
    }
    if calls:
        # The plan's tool steps, kept as one assistant message's calls: the history reads
        # like any tool turn, and a turn cut short here is repaired like one.
        await turn.append(
            Role.ASSISTANT,
            "",
            {
                "turn_id": turn_id,
                "plan_calls": True,
                "tool_calls": [c.to_metadata() for c in calls.values()],
            },
        )
    log: list[dict[str, Any]] = []
    for step in plan:
        call = calls.get(step.step)
        if call is None:
            log.append({"step": step.step, "action": step.action(), "result": SYNTHESIS_RESULT})
            continue
        (result,) = await run_calls(turn, tools, [StepCall(call)], tool_context)
        text = cap_result(result.content, turn.agent.max_tool_result_chars)
        if result.status != "ok" and not text.startswith("error"):
            text = f"{result.status}: {text}"
        log.append({"step": step.step, "action": step.action(), "result": text})
    return log


def _check_argument_sizes(plan: tuple[PlanStep, ...], limits: ToolLimits) -> None:
    """A tool step whose input is longer than a tool call's arguments may be makes the
    plan invalid: the planner gets to repair it, as for any other invalid step."""
    for step in plan:
        if step.tool is None:
            continue
        size = len(_json(step.tool_input))
        if size > limits.max_argument_chars:
            raise InvalidPlan(
                f"step {step.step}'s tool_input is too large ({size} characters as JSON;"
                f" at most {limits.max_argument_chars})"
            )


def _json(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=False)
