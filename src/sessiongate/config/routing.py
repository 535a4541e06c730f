"""Configuration of routing, modes, the safety gate and actions (DESIGN.md §8).

A section of its own so each file stays about one thing; `Settings` in config/settings.py
gathers them.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Literal

from pydantic import Field, field_validator

from sessiongate.config.base import Duration, Section

#: A mode's name: it appears in URLs (`/v1/modes/{mode}/unlock`) and key templates.
MODE_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: What a route's key template may name.
KEY_TEMPLATE_FIELDS = frozenset({"user", "agent", "channel", "device", "mode"})
_TEMPLATE_FIELD = re.compile(r"\{([^{}]*)\}")

OutputContract = Literal["none", "script_delimiter"]
ActionsPolicy = Literal["off", "client", "sandbox"]


class RouteWhen(Section):
    """What a request must match; an unset field matches anything."""

    primary: bool | None = None
    user: str | None = None
    mode: str | None = None
    channel: str | None = None


class RouteConfig(Section):
    """One `[[routes]]` entry: the first whose `when` matches picks agent and key."""

    when: RouteWhen = RouteWhen()
    agent: str = "main"
    #: A template over {user}, {agent}, {channel}, {device}, {mode}.
    key: str = "chat:{user}"

    @field_validator("key")
    @classmethod
    def _check_template(cls, value: str) -> str:
        return check_key_template(value)


class ModeConfig(Section):
    """`[modes.<name>]`: a mode a user may have enabled and unlock."""

    #: The agent a request in this mode goes to when no route names the mode.
    agent: str | None = None
    #: The voice replies in this mode are spoken with (issue 10's `[voices.<name>]`).
    voice: str | None = None
    #: How long an unlock lasts unless the unlock asks for less.
    unlock_ttl: Duration = timedelta(hours=1)


class ClassifierConfig(Section):
    """`[agents.<name>.classifier]`: seed 004's safety gate before the reply model."""

    enabled: bool = True
    #: The control model that answers ---UNSAFE---, ---CHAT--- or ---AGENT---; unset:
    #: the deterministic keyword rules decide.
    model: str | None = None
    #: Extra words or phrases (case-insensitive) that mark a request UNSAFE, and ones that
    #: mark it AGENT (a request to act on the computer), on top of the built-in lists.
    unsafe_terms: list[str] = []
    agent_terms: list[str] = []
    #: The most time the control model may take before the rules decide instead.
    timeout: Duration = timedelta(seconds=15)
    #: When the control model fails, times out or answers no marker: `keywords` (the
    #: rules decide) or `refuse` (the turn is refused as UNSAFE: for gateways that run
    #: scripts, where the rules' limited recall is not an acceptable net).
    on_failure: Literal["keywords", "refuse"] = "keywords"


class SandboxConfig(Section):
    """`[actions]`: limits for scripts run with `actions = "sandbox"`."""

    #: The interpreter run inside the sandbox: a path, or a name looked up in
    #: /usr/local/bin, /usr/bin and /bin (what the sandbox mounts), at start-up.
    python: str = "python3"
    #: CPU seconds (RLIMIT_CPU) and wall-clock time before the process group is killed.
    cpu_seconds: int = Field(10, ge=1, le=3600)
    wall_timeout: Duration = timedelta(seconds=20)
    #: Address space (RLIMIT_AS), in MiB.
    memory_mb: int = Field(512, ge=32, le=65_536)
    #: Processes (RLIMIT_NPROC) and open files (RLIMIT_NOFILE).
    max_processes: int = Field(32, ge=1, le=4096)
    max_open_files: int = Field(64, ge=8, le=65_536)
    #: The largest file the script may write (RLIMIT_FSIZE), in MiB.
    max_file_mb: int = Field(16, ge=1, le=4096)
    #: stdout and stderr are each cut to this many characters.
    max_output_chars: int = Field(64_000, ge=100, le=10_000_000)
    #: Scripts waiting or running at once, gateway-wide; one more is refused.
    max_concurrent: int = Field(2, ge=1, le=64)


def check_key_template(value: str) -> str:
    """A key template names only known fields and renders to something non-empty."""
    if not value.strip():
        raise ValueError("a key template may not be empty")
    for name in _TEMPLATE_FIELD.findall(value):
        if name not in KEY_TEMPLATE_FIELDS:
            allowed = ", ".join("{" + f + "}" for f in sorted(KEY_TEMPLATE_FIELDS))
            raise ValueError(f"unknown field {{{name}}} in key template {value!r}; use {allowed}")
    return value


def check_routing(
    routes: list[RouteConfig],
    modes: dict[str, ModeConfig],
    agents: set[str],
    models: set[str],
    classifiers: dict[str, ClassifierConfig | None],
) -> list[str]:
    """Cross-section checks: names that must exist, for `config check` and start-up.

    `agents` is every agent a route or mode may name (configured ones, or `main` when
    none are); `models` every defined model; `classifiers` each agent's gate, if any."""
    problems: list[str] = []
    for name, mode in modes.items():
        if not MODE_NAME.fullmatch(name):
            problems.append(f"modes.{name}: a mode name is 1-32 lowercase letters, digits, _ or -")
        if mode.agent is not None and mode.agent not in agents:
            problems.append(f"modes.{name}.agent: no agent named {mode.agent!r}")
    for index, route in enumerate(routes):
        where = f"routes[{index}]"
        if route.agent not in agents:
            problems.append(f"{where}.agent: no agent named {route.agent!r}")
        if route.when.mode is not None and route.when.mode not in modes:
            problems.append(f"{where}.when.mode: no mode named {route.when.mode!r} in [modes]")
    for agent, classifier in classifiers.items():
        model = classifier.model if classifier is not None else None
        if model is not None and model not in models:
            problems.append(
                f"agents.{agent}.classifier.model: model {model!r} is not defined in [models]"
            )
    return problems
