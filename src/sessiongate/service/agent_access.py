"""Which agents a caller may run and which models an override may name: the rules of
core/agent_access.py over the configured routes, modes, seed endpoints and agents, with
the caller's modes as the mode store has them now.

Every transport that lets a client name an agent asks here before anything is queued
or written; a turn asks again when it starts (service/turn/pipeline.py), so a path that forgets
to ask is still refused. The answer that needs no mode state is kept per user (it
depends on the configuration alone); only an agent that a mode's route alone reaches
costs a look at the mode store.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sessiongate.config.compat import CompatConfig
from sessiongate.core.agent_access import (
    AccessPolicy,
    AgentGrant,
    Who,
    default_agent_for,
    granted,
    modes_that_open,
    refuse_agent,
    refuse_model,
)
from sessiongate.core.modes import ModeState
from sessiongate.core.users import Caller, User
from sessiongate.service.agents import AgentProfile
from sessiongate.service.routing import ModeStates, RouteService

#: Settled answers kept per (user, agent); past this many the cache starts again.
_MAX_CACHED = 4096
#: The override fields that name a model.
OVERRIDE_MODEL_FIELDS = ("reply_model", "control_model")


def endpoint_agents(compat: CompatConfig) -> frozenset[str]:
    """The agents bound to a seed endpoint (every authenticated user may use those)."""
    return frozenset(
        (compat.claude_agent, compat.codex_agent, compat.lifehub_agent, compat.desktop_agent)
    )


class AgentAccess:
    def __init__(
        self,
        agents: Mapping[str, AgentProfile],
        routes: RouteService,
        endpoints: frozenset[str],
        states: ModeStates | None,
    ) -> None:
        self.agents = agents
        self.policy = AccessPolicy(
            routes=routes.routes,
            mode_agents=routes.mode_agents,
            default_agent=routes.default_agent,
            endpoint_agents=endpoints,
            grants={
                name: AgentGrant(users=agent.users, runs_actions=agent.actions == "sandbox")
                for name, agent in agents.items()
            },
        )
        self.states = states
        self._settled: dict[tuple[Who, str], bool | None] = {}

    def _who(self, caller: Caller) -> Who:
        return Who(caller.name, primary=caller.primary, admin=caller.admin)

    def _settled_answer(self, who: Who, agent: str) -> bool | None:
        key = (who, agent)
        if key not in self._settled:
            if len(self._settled) >= _MAX_CACHED:
                self._settled.clear()
            self._settled[key] = granted(self.policy, agent, who)
        return self._settled[key]

    async def allows(self, caller: Caller, agent: str) -> bool:
        who = self._who(caller)
        answer = self._settled_answer(who, agent)
        if answer is not None:
            return answer
        if self.states is None:
            return False
        user = User(caller.name, caller.primary, caller.admin, caller.modes)
        for mode in modes_that_open(self.policy, agent, who, caller.modes):
            if await self.states.state(user, mode) is ModeState.ACTIVE:
                return True
        return False

    async def check(self, caller: Caller, name: str | None) -> AgentProfile:
        """The agent `name` names (the default agent for None), or AgentNotAllowed —
        alike for an agent that exists for someone else and one that exists nowhere."""
        chosen = name
        if chosen is None:
            chosen = default_agent_for(self.policy, self._who(caller), "http")
        profile = self.agents.get(chosen)
        if profile is None or not await self.allows(caller, chosen):
            raise refuse_agent(chosen)
        return profile

    async def usable(self, caller: Caller) -> list[str]:
        """Every agent the caller may run, in configuration order (`GET /v1/models`)."""
        return [name for name in self.agents if await self.allows(caller, name)]

    async def check_overrides(self, caller: Caller, changes: Mapping[str, Any]) -> None:
        """An override may name only a model that one of the caller's agents lists (a
        turn uses it only where its own agent lists it: service/turn/reply.py)."""
        named = [(f, changes[f]) for f in OVERRIDE_MODEL_FIELDS if isinstance(changes.get(f), str)]
        if not named:
            return
        listed: set[str] = set()
        for name in await self.usable(caller):
            listed |= self.agents[name].listed_models
        for field, model in named:
            if model not in listed:
                raise refuse_model(field, model)
