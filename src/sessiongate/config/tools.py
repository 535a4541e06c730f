"""Configuration of tool sources: MCP servers, the notes store and the built-in tools.

One topic per config module (config/lifecycle.py, config/models.py, config/agents.py,
config/limits.py, …); `Settings` in config/settings.py gathers them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import timedelta
from typing import Literal

from pydantic import Field, field_serializer, model_validator

from sessiongate.config.base import Duration, Section
from sessiongate.config.handoff import VideoToolConfig

#: What a model may call a tool (OpenAI's and Anthropic's common rule).
TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
#: An MCP server's name becomes the `<server>__` prefix of its tools.
SERVER_NAME = re.compile(r"^[a-zA-Z0-9-]{1,32}$")
#: Names no MCP server may take, since its tools would pass for the gateway's own:
#: `agent` (other agents are the `agent__<name>` tools) and the family of each built-in
#: tool (`notes_search`, `tasks_add`, `weather_current`, `image_generate`,
#: `video_generate`), whose globs (`notes_*`) would also match `<server>__<tool>`.
RESERVED_SERVER_NAMES = frozenset({"agent", "notes", "tasks", "weather", "image", "video"})


class McpServerConfig(Section):
    """One MCP server: `command` (+ `args`, `env`) for stdio, or `url` for streamable
    HTTP. Exactly one of the two."""

    command: str | None = None
    args: list[str] = []
    #: Extra environment for a stdio server. Values of the form `${NAME}` are read from
    #: the gateway's environment at start-up, so secrets stay out of the file.
    env: dict[str, str] = {}
    url: str | None = None
    #: Extra HTTP headers for a streamable HTTP server (`${NAME}` read from the
    #: environment, as for `env`).
    headers: dict[str, str] = {}
    #: One tool call, from request to result.
    timeout: Duration = timedelta(seconds=60)
    #: Starting the server (or opening its HTTP session) and its initialize handshake.
    connect_timeout: Duration = timedelta(seconds=20)
    #: Listing the server's tools.
    list_timeout: Duration = timedelta(seconds=20)
    #: After the server failed to connect or to list its tools, for this long turns offer
    #: nothing from it and wait for nothing, instead of trying again.
    retry_backoff: Duration = timedelta(seconds=10)

    @model_validator(mode="after")
    def _one_transport(self) -> McpServerConfig:
        if (self.command is None) == (self.url is None):
            raise ValueError("set exactly one of command (stdio) or url (streamable HTTP)")
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return self

    @field_serializer("env", "headers", when_used="json")
    def _mask(self, value: dict[str, str]) -> dict[str, str]:
        return {k: "********" if not v.startswith("${") else v for k, v in value.items()}


def check_mcp_servers(servers: Mapping[str, McpServerConfig]) -> list[str]:
    """Problems with the `[mcp.<server>]` names, one message each."""
    problems = []
    for server in servers:
        if not SERVER_NAME.fullmatch(server):
            problems.append(
                f"mcp.{server}: a server name is 1-32 letters, digits or '-' (it prefixes"
                " its tools as <server>__<tool>)"
            )
        elif server.lower() in RESERVED_SERVER_NAMES:
            problems.append(
                f"mcp.{server}: {server!r} is reserved: its tools, named {server}__<tool>,"
                " would pass for the gateway's own (reserved:"
                f" {', '.join(sorted(RESERVED_SERVER_NAMES))}); rename the server"
            )
    return problems


class NotesConfig(Section):
    #: Semantic ranking fused with keyword ranking: unset (keywords only), "builtin" (a
    #: local model shipped inside a PyPI package, no download at run time), or the name
    #: of a `[models.<name>]` entry serving an OpenAI-compatible `/v1/embeddings`.
    embeddings: str | None = None
    #: Notes are searched in chunks of about this many characters, split on paragraphs.
    chunk_chars: int = Field(800, ge=100, le=20_000)
    #: Results `notes_search` returns unless the model asks for another number.
    top_k: int = Field(5, ge=1, le=50)
    #: The longest note accepted, in characters.
    max_note_chars: int = Field(200_000, ge=100, le=10_000_000)
    #: The most notes one user may keep; a note past it is refused (409 note_limit_reached).
    max_notes_per_user: int = Field(10_000, ge=1, le=10_000_000)


class TasksConfig(Section):
    #: The most tasks (open and done) one user may keep; past it: 409 task_limit_reached.
    max_tasks_per_user: int = Field(10_000, ge=1, le=10_000_000)


class WeatherToolConfig(Section):
    #: An Open-Meteo-shaped API (`/v1/forecast` and `/v1/search` for place names).
    base_url: str = "https://api.open-meteo.com"
    geocoding_url: str = "https://geocoding-api.open-meteo.com"
    timeout: Duration = timedelta(seconds=15)


class ImagesToolConfig(Section):
    #: The `[models.<name>]` entry (provider "openai") whose server has `/v1/images`.
    model: str | None = None
    size: str = "1024x1024"
    timeout: Duration = timedelta(seconds=120)


class ToolsConfig(Section):
    weather: WeatherToolConfig = WeatherToolConfig()
    images: ImagesToolConfig = ImagesToolConfig()
    video: VideoToolConfig = VideoToolConfig()


Runner = Literal["chat", "plan_execute"]


def check_tool_patterns(value: list[str] | None) -> list[str] | None:
    """Tool names or globs (`notes_*`, `time__*`, `*`): the characters of tool names plus
    glob wildcards."""
    if value is None:
        return None
    for pattern in value:
        if not re.fullmatch(r"[a-zA-Z0-9_*?\[\]-]{1,80}", pattern):
            raise ValueError(f"{pattern!r} is not a tool name or glob (e.g. notes_*)")
    return value
