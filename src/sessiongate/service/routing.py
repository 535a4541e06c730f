"""Routing requests that name no key: the rules of core/routing.py over the configured
routes and the user's modes as the store has them now."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

from sessiongate.config.routing import ModeConfig, RouteConfig
from sessiongate.core.modes import ModeState
from sessiongate.core.routing import (
    Route,
    RouteDecision,
    RouteRequest,
    route,
    validate_label,
)
from sessiongate.core.users import User
from sessiongate.errors import ConfigError, InvalidInput


class ModeStates(Protocol):
    """What routing needs of the mode service: a mode's state for a user, now."""

    async def state(self, user: User, mode: str) -> ModeState: ...


class RouteService:
    def __init__(
        self,
        routes: Sequence[RouteConfig],
        modes: Mapping[str, ModeConfig],
        agents: Collection[str],
        states: ModeStates | None,
    ) -> None:
        self.routes = tuple(
            Route(
                agent=r.agent,
                key=r.key,
                primary=r.when.primary,
                user=r.when.user,
                mode=r.when.mode,
                channel=r.when.channel,
            )
            for r in routes
        )
        self.mode_agents = {name: mode.agent for name, mode in modes.items()}
        #: Who runs seed 000's table: `main`, else the first agent (as `pick_agent`).
        self.default_agent = "main" if "main" in agents else next(iter(agents), "main")
        self.states = states
        # Checked again here (config check does too) because tests and embedders build
        # settings without loading a file.
        for index, rule in enumerate(self.routes):
            if rule.agent not in agents:
                raise ConfigError(f"routes[{index}].agent: no agent named {rule.agent!r}")
        for name, agent in self.mode_agents.items():
            if agent is not None and agent not in agents:
                raise ConfigError(f"modes.{name}.agent: no agent named {agent!r}")

    async def decide(
        self,
        user: User,
        *,
        channel: str,
        mode: str | None = None,
        device: str | None = None,
    ) -> RouteDecision:
        """Bad channel, device or mode names are a 400 before anything is looked up."""
        validate_label(channel, "channel")
        validate_label(device, "device")
        if mode is not None and (not isinstance(mode, str) or not 1 <= len(mode) <= 32):
            raise InvalidInput("mode must be a name of 1-32 characters", code="invalid_mode")
        state = await self._state(user, mode)
        request = RouteRequest(user.name, user.primary, channel, mode, device)
        return route(request, self.routes, self.mode_agents, state, self.default_agent)

    async def _state(self, user: User, mode: str | None) -> ModeState | None:
        if mode is None:
            return None
        if mode not in self.mode_agents:
            return ModeState.UNKNOWN
        if mode not in user.modes:
            return ModeState.NOT_ENABLED  # no need to ask the store
        if self.states is None:
            return ModeState.LOCKED
        return await self.states.state(user, mode)
