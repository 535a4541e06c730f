"""Who may run which agent, and which models a key's override may name. Pure.

Naming an agent (`agent` on a message, `model` on the OpenAI route, `?agent=` on a socket
or a tool listing) never reaches more than the caller's routes and endpoints would give
them. An agent is usable by a caller when

- one of the caller's routes could pick it: routing is asked (core/routing.py, the same
  rule that routes a request with no key) for every channel the routes tell apart, with
  no mode and with each mode active for the caller now;
- a seed endpoint bound to it is open to the caller (every authenticated user may use
  `/api/claude/ws`, `/api/codex/ws`, `POST /chat` and `GET /ai`);
- or its `[agents.X] users` lets the caller in: `"*"`, a user's name, `"primary"`,
  `"admin"`.

An agent that runs actions on the gateway's host (`actions = "sandbox"`) is for
`users` alone, which defaults to `["primary", "admin"]`: a route or an endpoint bound to
it does not open it to anyone else.

A refusal never tells whether the named agent exists for someone else: an agent nobody
configured and one the caller may not use answer alike.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass

from sessiongate.core.control import BUILTIN_JUDGE
from sessiongate.core.modes import ModeState
from sessiongate.core.routing import Route, RouteRequest, route
from sessiongate.errors import Forbidden, SessionGateError

#: Who may run an agent that runs actions on the gateway's host, unless it says.
SANDBOX_USERS: tuple[str, ...] = ("primary", "admin")
#: The channel that stands for every channel no route names.
_OTHER_CHANNEL = "_other"


class AgentNotAllowed(Forbidden):
    code = "agent_not_allowed"


class ModelNotAllowed(Forbidden):
    code = "model_not_allowed"


@dataclass(frozen=True, slots=True)
class Who:
    """The caller as access rules see it."""

    name: str
    primary: bool = False
    admin: bool = False


@dataclass(frozen=True, slots=True)
class AgentGrant:
    """What an agent's own configuration says about who may run it."""

    #: `[agents.X] users`; None when unset.
    users: tuple[str, ...] | None = None
    #: `actions = "sandbox"`: its scripts run on the gateway's host.
    runs_actions: bool = False


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """Everything the rule reads, from the configuration."""

    routes: tuple[Route, ...]
    mode_agents: Mapping[str, str | None]
    default_agent: str
    #: Agents bound to a seed endpoint every authenticated user may use.
    endpoint_agents: frozenset[str]
    grants: Mapping[str, AgentGrant]

    def channels(self) -> tuple[str, ...]:
        """One channel per distinct way the routes treat channels: each one they name,
        and one they do not."""
        named = sorted({r.channel for r in self.routes if r.channel is not None})
        other = _OTHER_CHANNEL
        while other in named:
            other += "_"
        return (*named, other)


def users_allow(users: Iterable[str], who: Who) -> bool:
    """Whether a `users` list names the caller: `*`, its name, `primary`, `admin`."""
    for entry in users:
        if entry == "*" or entry == who.name:
            return True
        if (entry == "primary" and who.primary) or (entry == "admin" and who.admin):
            return True
    return False


def routed_agents(policy: AccessPolicy, who: Who, active_modes: Collection[str]) -> set[str]:
    """Every agent routing could pick for the caller, on any channel, with no mode or
    one of `active_modes` (each one enabled for the caller and unlocked now)."""
    agents: set[str] = set()
    for channel in policy.channels():
        for mode in (None, *sorted(active_modes)):
            request = RouteRequest(who.name, who.primary, channel, mode)
            state = None if mode is None else ModeState.ACTIVE
            try:
                decision = route(
                    request, policy.routes, policy.mode_agents, state, policy.default_agent
                )
            except SessionGateError:
                continue  # a key template this caller cannot fill routes nobody there
            agents.add(decision.agent)
    return agents


def granted(policy: AccessPolicy, agent: str, who: Who) -> bool | None:
    """The answer that needs no mode state: True or False when it is settled, None when
    only a mode active for the caller could open the agent."""
    grant = policy.grants.get(agent)
    if grant is None:
        return False
    if grant.runs_actions:
        return users_allow(grant.users if grant.users is not None else SANDBOX_USERS, who)
    if grant.users is not None and users_allow(grant.users, who):
        return True
    if agent in policy.endpoint_agents or agent in routed_agents(policy, who, ()):
        return True
    return None


def default_agent_for(policy: AccessPolicy, who: Who, channel: str) -> str:
    """The agent a request that names none runs: the default agent when the caller may
    run it, else the one the caller's own route picks (no mode)."""
    if granted(policy, policy.default_agent, who):
        return policy.default_agent
    request = RouteRequest(who.name, who.primary, channel)
    try:
        return route(request, policy.routes, policy.mode_agents, None, policy.default_agent).agent
    except SessionGateError:
        return policy.default_agent


def modes_that_open(
    policy: AccessPolicy, agent: str, who: Who, enabled: Iterable[str]
) -> list[str]:
    """Which of the caller's enabled modes would, once active, let routing pick `agent`."""
    return [
        mode
        for mode in enabled
        if mode in policy.mode_agents and agent in routed_agents(policy, who, (mode,))
    ]


def refuse_agent(name: str) -> AgentNotAllowed:
    return AgentNotAllowed(
        f"agent {name[:64]!r} is not available to you: it is not one of your routes'"
        " agents, not bound to an endpoint you may use, and its `users` do not include you",
    )


def agent_models(
    reply_model: str,
    fallback_models: Sequence[str],
    control_model: str | None,
    control_fallback_models: Sequence[str],
    extra: Sequence[str],
) -> frozenset[str]:
    """The models an agent lists: what an override on one of its keys may name. The
    built-in lexical judge ends every control chain anyway, so it is always listed."""
    names = [reply_model, *fallback_models, *control_fallback_models, *extra, BUILTIN_JUDGE]
    if control_model is not None:
        names.append(control_model)
    return frozenset(names)


def refuse_model(field: str, name: str) -> ModelNotAllowed:
    return ModelNotAllowed(
        f"{field} {name[:64]!r} is not one of the models your agents list"
        " (their model, fallbacks, control model or `[agents.X] models`)",
    )
