"""Configuration of the source designs' own clients (`[compat]`): which agent and key
each seed endpoint uses, and the models seed 002's `provider` field picks."""

from __future__ import annotations

from sessiongate.config.base import Section


class CompatConfig(Section):
    """The agents and keys behind the source designs' own clients."""

    #: Seed 001's two WebSocket endpoints.
    claude_agent: str = "main"
    codex_agent: str = "main"
    #: Seed 002's `POST /chat`: its agent, its key (`{user}` is the caller's name), and
    #: the models its `provider` field picks (`{openai = "gpt", ollama = "local"}`).
    lifehub_agent: str = "main"
    lifehub_key: str = "lifehub:{user}"
    #: The user `POST /chat` runs as for a request with no API key from this machine's
    #: loopback address (seed 002's front end sends none), as `desktop_user` for `/ai`.
    #: Unset: a key is required.
    lifehub_user: str | None = None
    #: Seed 004's `GET /ai`: its agent and its key (`{user}` is the caller's name).
    desktop_agent: str = "main"
    desktop_key: str = "desktop:{user}"
    #: The user `GET /ai` runs as for a request with no API key from this machine's
    #: loopback address (seed 004's desktop client sends none); api/compat/loopback.py
    #: says which requests count. Unset: a key is required.
    desktop_user: str | None = None
    #: What seed 002's `provider` picks; empty: the agent's own model answers whatever
    #: `provider` says (and the `start` event says so).
    providers: dict[str, str] = {}
