"""Routing: which agent and which session key a request without a key goes to. Pure.

One function serves `POST /v1/chat`, `/v1/ws` without a key and the OpenAI route
without `X-Session-Key` (DESIGN.md §8). Routes are tried in order and the first whose
`when` matches wins. A request's mode counts only when it is active (configured, enabled
for the user and unlocked now, core/modes.py); otherwise the request routes as if it
named no mode and the decision says why.

With no routes configured, seed 000's table applies: the primary user to `main` on
`agent:main:main`, anyone else to `main` on `chat:{user}`. A request whose active mode no
route names goes to the mode's own agent (or the matched route's) on `mode:{mode}:{user}`,
so a mode's conversation never mixes into the normal one.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sessiongate.core.keys import validate_session_key
from sessiongate.core.modes import ModeState
from sessiongate.errors import InvalidInput

#: What a client may call its channel or device: these become part of session keys.
_LABEL_RE = re.compile(r"[A-Za-z0-9._@-]{1,64}")
#: The key of a mode's conversation when no route names the mode.
MODE_KEY_TEMPLATE = "mode:{mode}:{user}"
_FIELD_RE = re.compile(r"\{(user|agent|channel|device|mode)\}")


@dataclass(frozen=True, slots=True)
class Route:
    """One rule. An unset condition matches anything."""

    agent: str
    key: str
    primary: bool | None = None
    user: str | None = None
    mode: str | None = None
    channel: str | None = None

    def matches(self, request: RouteRequest, mode: str | None) -> bool:
        return (
            (self.primary is None or self.primary == request.primary)
            and (self.user is None or self.user == request.user)
            and (self.mode is None or self.mode == mode)
            and (self.channel is None or self.channel == request.channel)
        )


#: Seed 000's table: what applies when no `[[routes]]` are configured.
DEFAULT_ROUTES: tuple[Route, ...] = (
    Route(agent="main", key="agent:main:main", primary=True),
    Route(agent="main", key="chat:{user}"),
)


@dataclass(frozen=True, slots=True)
class RouteRequest:
    user: str
    primary: bool
    #: The transport, or what the client said it is (`web`, `voice`, …).
    channel: str
    mode: str | None = None
    device: str | None = None


@dataclass(frozen=True, slots=True)
class RouteDecision:
    agent: str
    key: str
    #: The mode the turn runs in (None: normal), and the one the request asked for.
    mode: str | None
    requested_mode: str | None
    #: `matched` (a route), `mode_active`, or why a requested mode did not count
    #: (`mode_not_enabled`, `mode_locked`, `mode_unknown`).
    reason: str
    #: The index of the route that matched in the configured list; None for the built-in
    #: table or a mode's own route.
    rule: int | None

    def to_event_fields(self) -> dict[str, Any]:
        return {
            "agent": self.agent,
            "session_key": self.key,
            "mode": self.mode,
            "requested_mode": self.requested_mode,
            "reason": self.reason,
            "rule": self.rule,
        }


def validate_label(value: str | None, what: str) -> str | None:
    """A channel or device name from a client: it may end up in a session key."""
    if value is None:
        return None
    if not isinstance(value, str) or not _LABEL_RE.fullmatch(value):
        raise InvalidInput(
            f"{what} must be 1-64 letters, digits or . _ @ -", code=f"invalid_{what}"
        )
    return value


def render_key(template: str, request: RouteRequest, agent: str, mode: str | None) -> str:
    values = {
        "user": request.user,
        "agent": agent,
        "channel": request.channel,
        "device": request.device or "default",
        "mode": mode or "normal",
    }
    key = _FIELD_RE.sub(lambda m: values[m.group(1)], template)
    return validate_session_key(key)


def route(
    request: RouteRequest,
    routes: Sequence[Route],
    mode_agents: Mapping[str, str | None],
    mode_state: ModeState | None,
    default_agent: str = "main",
) -> RouteDecision:
    """Decide agent and key. `routes` empty means seed 000's table, run by
    `default_agent` (`main`, or the gateway's first agent when it has no `main`);
    `mode_agents` maps each configured mode to its agent (or None); `mode_state` is the
    requested mode's state now (None when the request named no mode)."""
    table = tuple(routes) or tuple(replace(r, agent=default_agent) for r in DEFAULT_ROUTES)
    configured = bool(routes)
    active = request.mode if mode_state is ModeState.ACTIVE else None
    if request.mode is None:
        reason = "matched"
    else:
        reason = mode_state.value if mode_state is not None else ModeState.UNKNOWN.value
    for index, rule in enumerate(table):
        if not rule.matches(request, active):
            continue
        if active is not None and rule.mode is None:
            # The mode is on but this route does not speak for it: the mode's own route.
            agent = mode_agents.get(active) or rule.agent
            return RouteDecision(
                agent,
                render_key(MODE_KEY_TEMPLATE, request, agent, active),
                active,
                request.mode,
                reason,
                None,
            )
        return RouteDecision(
            rule.agent,
            render_key(rule.key, request, rule.agent, active),
            active,
            request.mode,
            reason,
            index if configured else None,
        )
    # No configured route matched: seed 000's table (whose last route matches anything)
    # is the last word.
    return route(request, (), mode_agents, mode_state, default_agent)
