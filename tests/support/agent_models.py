"""Stand-ins for tool-calling models and tools, for the agent runtime's tests.

`ToolModel` answers step by step from a script: each step is text, tool calls, or a
function of the request (to answer from what the model was sent). It records every
request with its options, so tests assert on exactly what a provider would receive.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext, ToolFailed
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


@dataclass(frozen=True)
class Call:
    name: str
    arguments: Any = field(default_factory=dict)  # a dict (sent as JSON) or raw text
    call_id: str = ""

    def chunk(self, index: int) -> ToolCallChunk:
        raw = self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)
        return ToolCallChunk(self.call_id or f"call_{index}", self.name, raw)


Step = str | list[Call] | Callable[[Sequence[WireMessage], ModelOptions], "str | list[Call]"]


@dataclass
class Request:
    messages: list[dict[str, Any]]
    options: ModelOptions


class ToolModel:
    capabilities = ModelCapabilities(tools=True, images=True, json_output=True)

    def __init__(self, *steps: Step, name: str = "toolmodel", repeat_last: bool = True) -> None:
        self.name = name
        self.steps = list(steps)
        self.repeat_last = repeat_last
        self.requests: list[Request] = []
        self.gate: asyncio.Event | None = None

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.requests.append(Request([dict(m) for m in messages], options))
        index = len(self.requests) - 1
        if index >= len(self.steps) and not self.repeat_last:
            raise AssertionError(f"{self.name} was called {index + 1} times")
        step = self.steps[min(index, len(self.steps) - 1)]
        if callable(step):
            step = step(messages, options)
        if isinstance(step, str):
            for word in step.split(" "):
                yield TextDelta(word + " ")
                await asyncio.sleep(0)
        else:
            for n, call in enumerate(step):
                yield call.chunk(index * 10 + n)
        yield Usage(prompt_tokens=len(messages), completion_tokens=3)


def toolbox(hang: asyncio.Event | None = None) -> StaticToolSource:
    """add, echo, fail, hang and huge: enough to exercise every rule of a tool step."""

    async def add(arguments: dict[str, Any], context: ToolContext) -> str:
        return str(arguments["a"] + arguments["b"])

    async def echo(arguments: dict[str, Any], context: ToolContext) -> str:
        return f"{context.user}:{arguments['text']}"

    async def fail(arguments: dict[str, Any], context: ToolContext) -> str:
        raise ToolFailed("the service said no")

    async def crash(arguments: dict[str, Any], context: ToolContext) -> str:
        raise RuntimeError("bug in a tool")

    async def sleep(arguments: dict[str, Any], context: ToolContext) -> str:
        if hang is not None:
            hang.set()
        await asyncio.sleep(3600)
        return "never"

    async def huge(arguments: dict[str, Any], context: ToolContext) -> str:
        return "H" * 10_000 + "MIDDLE" + "T" * 10_000

    number = {"type": "number"}
    tools = [
        FunctionTool(
            ToolSpec(
                "add",
                "Add two numbers.",
                {
                    "type": "object",
                    "properties": {"a": number, "b": number},
                    "required": ["a", "b"],
                },
            ),
            add,
        ),
        FunctionTool(
            ToolSpec(
                "echo",
                "Echo text.",
                {
                    "type": "object",
                    "properties": {"text": {"type": "string"}},
                    "required": ["text"],
                },
            ),
            echo,
        ),
        FunctionTool(ToolSpec("fail", "Always fails."), fail),
        FunctionTool(ToolSpec("crash", "Has a bug."), crash),
        FunctionTool(ToolSpec("sleep", "Never returns."), sleep),
        FunctionTool(ToolSpec("huge", "A 20,006-character result."), huge),
    ]
    return StaticToolSource("test", tools)
