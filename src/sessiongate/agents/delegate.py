"""Agents as tools: `agent__<name>` runs a turn of that agent and returns its answer
(seed 001's delegations between agents, made real).

The delegated turn is an ordinary turn of the same user on a sub-key of the caller's key,
`<key>:to:<agent>` (hashed when that would pass 200 characters), so it has its own
history, lifecycle and locks, and the user can read it like any key. Delegation nests at
most `MAX_DEPTH` deep: deeper turns are not offered `agent__*` tools, so two agents that
offer each other cannot recurse without end.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from sessiongate.agents.tools import FunctionTool, Tool, ToolContext, ToolFailed, ToolOutput
from sessiongate.core.events import EndEvent, ErrorEvent, TokenEvent
from sessiongate.core.users import Caller
from sessiongate.models.base import ToolSpec
from sessiongate.service.turn.handle import InboundTurn, TurnHandle

PREFIX = "agent__"
MAX_DEPTH = 2
_MAX_KEY = 200

StartTurn = Callable[[InboundTurn], TurnHandle]


def sub_key(parent: str, agent: str) -> str:
    key = f"{parent}:to:{agent}"
    if len(key) <= _MAX_KEY:
        return key
    digest = hashlib.sha256(parent.encode()).hexdigest()[:24]
    return f"sub:{digest}:to:{agent}"[:_MAX_KEY]


class AgentToolSource:
    """One `agent__<name>` tool per configured agent. `bind` gives it the turn service's
    `start_turn` once that exists (the turn service needs the registry first)."""

    name = "agents"

    def __init__(self, agents: Sequence[str], descriptions: dict[str, str] | None = None) -> None:
        self._agents = list(agents)
        self._descriptions = descriptions or {}
        self._start: StartTurn | None = None
        self._tools = [self._tool(agent) for agent in self._agents]

    def bind(self, start_turn: StartTurn) -> None:
        self._start = start_turn

    async def start(self) -> None:
        return None

    async def tools(self) -> Sequence[Tool]:
        return self._tools

    async def aclose(self) -> None:
        return None

    def _tool(self, agent: str) -> Tool:
        about = self._descriptions.get(agent) or f"the {agent!r} agent"
        spec = ToolSpec(
            name=f"{PREFIX}{agent}",
            description=f"Delegate a request to {about} and get its answer.",
            parameters={
                "type": "object",
                "properties": {
                    "request": {
                        "type": "string",
                        "description": "What to ask the agent, with all it needs to know.",
                        "minLength": 1,
                    }
                },
                "required": ["request"],
                "additionalProperties": False,
            },
        )

        async def delegate(arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
            return await self._run(agent, str(arguments["request"]), context)

        return FunctionTool(spec, delegate, source="agent")

    async def _run(self, agent: str, request: str, context: ToolContext) -> ToolOutput:
        if self._start is None:
            raise ToolFailed("agent delegation is not available")
        if context.depth >= MAX_DEPTH:
            raise ToolFailed(f"delegation is limited to {MAX_DEPTH} levels")
        key = sub_key(context.key.name, agent)
        handle = self._start(
            InboundTurn(
                key,
                Caller(context.user, primary=context.primary),
                request,
                agent=agent,
                metadata={"delegated_by": {"key": context.key.name, "turn_id": context.turn_id}},
                depth=context.depth + 1,
            )
        )
        parts: list[str] = []
        failure: ErrorEvent | None = None
        try:
            async for event in handle.events():
                if isinstance(event, TokenEvent):
                    parts.append(event.content)
                elif isinstance(event, ErrorEvent):
                    failure = event
                elif isinstance(event, EndEvent):
                    pass
        except BaseException:
            # A delegating turn that is cancelled (or times out) cancels the turn it
            # started; that turn keeps what it had, as any cancelled turn does.
            handle.cancel()
            raise
        if failure is not None:
            raise ToolFailed(f"the {agent!r} agent failed: {failure.code}: {failure.message}")
        return ToolOutput("".join(parts), data={"key": key, "agent": agent})
