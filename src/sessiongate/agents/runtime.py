"""The agent runtime: picks the tools a turn may use and runs the agent's runner.

It implements the turn service's `AgentRuntime` port (service/turn/agent_runtime.py). Start-up
checks live here too: an agent whose `chat` runner offers tools needs reply models that
support them, and an agent may only name a runner that exists.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sessiongate.agents.delegate import MAX_DEPTH, PREFIX
from sessiongate.agents.registry import ToolRegistry
from sessiongate.agents.runners.chat import run_chat
from sessiongate.agents.runners.hosted import run_hosted
from sessiongate.agents.runners.plan import run_plan
from sessiongate.agents.tool_steps import ToolLimits
from sessiongate.agents.tools import Tool, ToolContext
from sessiongate.config.limits import LimitsConfig
from sessiongate.core.context import AssembledContext
from sessiongate.core.memory import is_message_id
from sessiongate.errors import ConfigError
from sessiongate.models.base import ModelOptions, ReplyModel, ToolSpec, capabilities_of
from sessiongate.service.agents import AgentProfile
from sessiongate.service.turn.agent_runtime import AgentTurn


class AgentRunner:
    def __init__(
        self,
        models: Mapping[str, ReplyModel],
        registry: ToolRegistry,
        limits: LimitsConfig | None = None,
    ) -> None:
        self.models = models
        self.registry = registry
        #: `[limits]` on tool calls (agents/tool_steps.py); their defaults without one.
        self.limits = ToolLimits.from_config(limits or LimitsConfig())

    async def tools_for(
        self, agent: AgentProfile, *, primary: bool, depth: int = 0
    ) -> dict[str, Tool]:
        """What `agent` offers a user (primary or not) at this delegation depth."""
        tools = await self.registry.offered(agent.tools, agent.tools_non_primary, primary=primary)
        # An agent is never its own tool (that is recursion, not delegation).
        tools.pop(PREFIX + agent.name, None)
        if depth >= MAX_DEPTH:
            tools = {n: t for n, t in tools.items() if not n.startswith(PREFIX)}
        return tools

    async def describe_tools(
        self, agent: AgentProfile, *, primary: bool
    ) -> list[tuple[ToolSpec, str]]:
        tools = await self.tools_for(agent, primary=primary)
        return [(tool.spec, tool.source) for tool in tools.values()]

    async def run(self, turn: AgentTurn) -> None:
        agent = turn.agent
        tools = await self.tools_for(agent, primary=turn.caller.primary, depth=turn.depth)
        context = ToolContext(
            user=turn.ref.owner,
            primary=turn.caller.primary,
            key=turn.ref,
            agent=agent.name,
            turn_id=turn.handle.turn_id,
            depth=turn.depth,
            session_id=turn.session_id,
            message_id=user_message_id(turn.context),
        )
        if agent.runner == "plan_execute":
            await run_plan(turn, self.models, tools, context, self.limits)
            return
        first = self.models.get(turn.model_names[0])
        # A session override may name a model without tool support: it then answers
        # without tools, the thread's steps written as text (never a rejected request).
        native = first is not None and capabilities_of(first).tools
        await run_chat(turn, self.models, tools, context, native_tools=native, limits=self.limits)

    async def hosted_equivalents(
        self, agent: AgentProfile, kinds: Sequence[str], *, primary: bool
    ) -> dict[str, Tool]:
        """Hosted tool type → the agent's tool that runs in its place, for the `kinds` a
        client offered that the agent has an equivalent of, offered to this user."""
        wanted = {kind: name for kind, name in agent.hosted_tools if kind in kinds}
        if not wanted:
            return {}
        found = await self.registry.offered(
            sorted(set(wanted.values())), agent.tools_non_primary, primary=primary
        )
        return {kind: found[name] for kind, name in wanted.items() if name in found}

    async def run_hosted(
        self, turn: AgentTurn, options: ModelOptions, kinds: Sequence[str]
    ) -> None:
        hosted = await self.hosted_equivalents(turn.agent, kinds, primary=turn.caller.primary)
        context = ToolContext(
            user=turn.ref.owner,
            primary=turn.caller.primary,
            key=turn.ref,
            agent=turn.agent.name,
            turn_id=turn.handle.turn_id,
            depth=turn.depth,
        )
        await run_hosted(turn, self.models, hosted, context, options, self.limits)


def check_agents(agents: Mapping[str, AgentProfile], models: Mapping[str, ReplyModel]) -> None:
    """Refuse at start-up an agent that needs what its models lack."""
    problems = []
    for agent in agents.values():
        if agent.runner not in ("chat", "plan_execute"):
            problems.append(f"agents.{agent.name}.runner: unknown runner {agent.runner!r}")
        if agent.runner != "chat" or not agent.tools:
            continue
        for name in (agent.reply_model, *agent.fallback_models):
            model = models.get(name)
            if model is not None and not capabilities_of(model).tools:
                problems.append(
                    f"agents.{agent.name}: it offers tools (tools = {list(agent.tools)}) but"
                    f" its model {name!r} cannot call tools; use a model with provider"
                    ' "openai" or "anthropic", or runner = "plan_execute" (which needs no'
                    " native tool calls)"
                )
    if problems:
        raise ConfigError("\n".join(problems))


def user_message_id(context: AssembledContext) -> str | None:
    """The id of the newest user message in the context (the one the turn answers)."""
    for message in reversed(context.messages):
        if message.role == "user":
            return message.source if is_message_id(message.source) else None
    return None
