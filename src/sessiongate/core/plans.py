"""Seed 002's plans: the planner's prompt, parsing and validating its JSON plan, and the
explainer's prompt. Pure.

A plan is `{"plan": [{"step": 1, "tool": "notes_search", "tool_input": {...}},
{"step": 2, "tool": null, "description": "Synthesize"}]}`. It is valid when it is one JSON
object (a code fence around it is tolerated: models add them), every step names a known
tool or null, every tool's input matches that tool's schema (checked as the registry
checks a tool call's arguments: core/tool_schema.py), steps are numbered 1..n in order,
and there are at most `max_steps` of them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiongate.core.tool_calls import ToolSpec
from sessiongate.core.tool_schema import check_arguments

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)
#: What a synthesis step (no tool) puts in the context log (seed 002's wording).
SYNTHESIS_RESULT = "Reasoning/synthesis step completed"


@dataclass(frozen=True, slots=True)
class PlanStep:
    step: int
    tool: str | None
    tool_input: dict[str, Any]
    description: str | None

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {"step": self.step, "tool": self.tool}
        if self.tool is not None:
            data["tool_input"] = self.tool_input
        if self.description is not None:
            data["description"] = self.description
        return data

    def action(self) -> str:
        """How the context log names the step: `notes_search({"query": "running"})`."""
        if self.tool is None:
            return self.description or "Synthesize results"
        return f"{self.tool}({json.dumps(self.tool_input, ensure_ascii=False)})"


class InvalidPlan(ValueError):
    pass


def parse_plan(text: str, tools: Mapping[str, ToolSpec], *, max_steps: int) -> tuple[PlanStep, ...]:
    """The validated plan, or InvalidPlan with a message fit to send back to the planner."""
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text.strip()
    try:
        data = json.loads(body)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise InvalidPlan(f"the answer is not one JSON object ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("plan"), list):
        raise InvalidPlan('the answer must be an object with a "plan" list')
    raw_steps = data["plan"]
    if not raw_steps:
        raise InvalidPlan("the plan has no steps")
    if len(raw_steps) > max_steps:
        raise InvalidPlan(f"the plan has {len(raw_steps)} steps; at most {max_steps} are allowed")
    steps = []
    for index, raw in enumerate(raw_steps, start=1):
        steps.append(_parse_step(index, raw, tools))
    return tuple(steps)


def _parse_step(index: int, raw: object, tools: Mapping[str, ToolSpec]) -> PlanStep:
    where = f"step {index}"
    if not isinstance(raw, dict):
        raise InvalidPlan(f"{where} is not an object")
    number = raw.get("step", index)
    if number != index or isinstance(number, bool):
        raise InvalidPlan(f"{where} is numbered {number!r}; steps are numbered 1, 2, 3 … in order")
    tool = raw.get("tool")
    description = raw.get("description")
    if description is not None and not isinstance(description, str):
        raise InvalidPlan(f"{where}: description must be a string")
    if tool is None:
        return PlanStep(index, None, {}, description)
    if not isinstance(tool, str) or tool not in tools:
        known = ", ".join(sorted(tools)) or "none"
        raise InvalidPlan(f"{where} names the unknown tool {tool!r} (tools: {known})")
    tool_input = raw.get("tool_input", {})
    if not isinstance(tool_input, dict):
        raise InvalidPlan(f"{where}: tool_input must be an object")
    # The registry's checker (bounded cost, nothing fetched, never fatal); the caller
    # runs parse_plan off the event loop.
    mismatch = check_arguments(tools[tool].parameters, tool_input).mismatch
    if mismatch is not None:
        raise InvalidPlan(
            f"{where}: tool_input for {tool} does not match its schema at {mismatch.where}:"
            f" {mismatch.message}"
        )
    return PlanStep(index, tool, tool_input, description)


def planner_prompt(tools: Sequence[ToolSpec], max_steps: int) -> str:
    """The planner's system message: the tools with their schemas, and the plan shape."""
    lines = [
        "You are a planning agent. Plan how to answer the user's request with the tools"
        " below. Do not answer the request yourself.",
        "Answer with one JSON object and nothing else, of the form",
        '{"plan": [{"step": 1, "tool": "<tool name>", "tool_input": {<arguments>}},'
        ' {"step": 2, "tool": null, "description": "<what to reason about>"}]}',
        f"Use at most {max_steps} steps, numbered from 1. Use a step with tool null to"
        " synthesize. Use only these tools, with arguments matching their JSON Schema:",
    ]
    for spec in tools:
        schema = json.dumps(spec.parameters, ensure_ascii=False, separators=(",", ":"))
        lines.append(f"- {spec.name}: {spec.description} Arguments schema: {schema}")
    if not tools:
        lines.append("- (no tools: plan synthesis steps only)")
    return "\n".join(lines)


def repair_prompt(problem: str) -> str:
    return (
        f"That plan cannot be used: {problem}. Answer again with one corrected JSON object"
        ' of the form {"plan": [...]} and nothing else.'
    )


def explainer_request(request: str, plan: Sequence[PlanStep], log: Sequence[dict[str, Any]]) -> str:
    """The explainer's user message: the request, the plan and what each step returned."""
    lines = [f"User request: {request}", "", "Execution plan:"]
    for step in plan:
        lines.append(f"- Step {step.step}: {step.tool or step.action()}")
    lines += ["", "Results from execution:"]
    for entry in log:
        lines.append(f"- Step {entry['step']}: {entry['action']}")
        lines.append(f"  Result: {entry['result']}")
    return "\n".join(lines)


EXPLAINER_INSTRUCTIONS = (
    "You are an explainer agent. Answer the user's request from the results of the plan"
    " that was run for it. Be helpful, concise and natural; say plainly when a step failed"
    " or found nothing."
)
