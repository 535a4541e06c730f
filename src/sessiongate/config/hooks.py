"""Configuration of webhooks (`[[hooks]]`, DESIGN.md §9) and its cross-section checks.

A section of its own so each file stays about one thing; `Settings` in config/settings.py
gathers it. Task extraction is an agent setting (`extract_tasks`), in config/agents.py.
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field, field_serializer, field_validator, model_validator

from sessiongate.config.base import Duration, Section

HookEvent = Literal[
    "turn.completed", "session.rotated", "tasks.extracted", "memory.changed", "session.compacted"
]
HOOK_EVENTS: tuple[HookEvent, ...] = (
    "turn.completed",
    "session.rotated",
    "tasks.extracted",
    "memory.changed",
    "session.compacted",
)
#: A hook's name: it is stored with each of its deliveries and shown by the API.
HOOK_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,31}$")
#: An environment variable's name.
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: Who task extraction runs for.
ExtractTasksFor = Literal["all", "non_primary"]


class HookConfig(Section):
    """One `[[hooks]]` entry: where events go, signed with the hook's secret."""

    url: str
    #: Identifies the hook's deliveries in the queue (unset: derived from the URL, so a
    #: hook whose URL changes starts a new queue and the old one's deliveries fail).
    name: str | None = None
    events: list[HookEvent] = list(HOOK_EVENTS)
    #: The HMAC-SHA256 key, or the name of the environment variable holding it (read once
    #: at start-up). Exactly one of the two.
    secret: str | None = Field(None, min_length=16, max_length=1024)
    secret_env: str | None = None
    #: Put message text (the user's and the reply's, extracted task titles) in the bodies.
    #: Off: ids, names and statuses only.
    include_text: bool = False
    #: One delivery attempt, from connecting to the end of the answer.
    timeout: Duration = timedelta(seconds=10)
    #: Attempts before a delivery is marked failed (kept for inspection).
    max_attempts: int = Field(8, ge=1, le=100)
    #: The wait before the first retry; it doubles per attempt (with jitter) up to
    #: `max_backoff`.
    backoff: Duration = timedelta(seconds=2)
    max_backoff: Duration = timedelta(minutes=10)
    #: Undelivered deliveries kept for this hook; past it the oldest are dropped (and
    #: logged). As many finished (delivered or failed) ones are kept for inspection.
    queue_size: int = Field(1000, ge=1, le=1_000_000)

    @field_validator("url")
    @classmethod
    def _check_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("url must be an http:// or https:// URL with a host")
        if any(c.isspace() for c in value):
            raise ValueError("url must not contain whitespace")
        return value

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str | None) -> str | None:
        if value is not None and not HOOK_NAME.fullmatch(value):
            raise ValueError("a hook name is 1-32 lowercase letters, digits, '_' or '-'")
        return value

    @field_validator("secret_env")
    @classmethod
    def _check_env(cls, value: str | None) -> str | None:
        if value is not None and not _ENV_NAME.fullmatch(value):
            raise ValueError("secret_env must be an environment variable's name")
        return value

    @field_validator("events")
    @classmethod
    def _some_events(cls, value: list[HookEvent]) -> list[HookEvent]:
        if not value:
            raise ValueError("a hook needs at least one event")
        return list(dict.fromkeys(value))

    @model_validator(mode="after")
    def _one_secret(self) -> HookConfig:
        if (self.secret is None) == (self.secret_env is None):
            raise ValueError("set exactly one of secret or secret_env (hooks are signed)")
        if self.max_backoff < self.backoff:
            raise ValueError("max_backoff must not be shorter than backoff")
        if self.timeout <= timedelta(0) or self.backoff <= timedelta(0):
            raise ValueError("timeout and backoff must be longer than zero")
        return self

    @field_serializer("secret", when_used="json")
    def _mask_secret(self, value: str | None) -> str | None:
        return None if value is None else "********"

    @field_serializer("url", when_used="json")
    def _mask_url(self, value: str) -> str:
        # `config check` prints the settings: a URL's password or query may be a token.
        return public_url(value)

    @property
    def hook_name(self) -> str:
        """`name`, else `url-` and 12 hex digits of the URL's SHA-256."""
        if self.name is not None:
            return self.name
        return "url-" + hashlib.sha256(self.url.encode()).hexdigest()[:12]


def public_url(url: str) -> str:
    """The URL without its user part and query (either may carry a token), for logs."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def check_hooks(hooks: list[HookConfig]) -> list[str]:
    """Cross-entry checks: two hooks may not share a name (their queues would mix)."""
    problems = []
    seen: dict[str, int] = {}
    for index, hook in enumerate(hooks):
        name = hook.hook_name
        if name in seen:
            problems.append(
                f"hooks.{index}: name {name!r} is already used by hooks.{seen[name]}"
                " (set a distinct `name`)"
            )
        else:
            seen[name] = index
    return problems
