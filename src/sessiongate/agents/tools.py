"""The tool port: what a tool is to the runtime, and what a source of tools must do.

A `Tool` has a `ToolSpec` (the name, description and JSON Schema a model sees) and an
async `call`. Built-in tools, MCP servers and other agents are all `ToolSource`s: the
registry asks each for its tools and never cares where a tool comes from (pydantic-ai's
toolsets taught that habit). A tool reports a failure the model should read by raising
`ToolFailed` (or returning `ToolOutput(is_error=True)`); anything else it raises is a bug
in the tool, and the runner still turns it into an error result, never a failed turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from sessiongate.core.keys import KeyRef
from sessiongate.models.base import ToolSpec


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Who a tool call is for. Tools that keep data (notes, tasks, artifacts) keep it
    under `user`; nothing here lets a tool reach another user's data."""

    user: str
    primary: bool
    key: KeyRef
    agent: str
    turn_id: str
    #: How deep in agent-as-tool delegation this call is (0: the user's own turn).
    depth: int = 0
    #: The turn's segment and the user message it answers (None when unknown): where a
    #: tool that keeps something says it came from (memory_save's source).
    session_id: str | None = None
    message_id: str | None = None


@dataclass(frozen=True, slots=True)
class ToolOutput:
    content: str
    is_error: bool = False
    #: Artifacts the tool made (images, files), served at `GET /v1/artifacts/{id}`.
    artifact_ids: tuple[str, ...] = ()
    #: Anything structured worth keeping beside the text (stored in the tool message's
    #: metadata, never sent to the model).
    data: dict[str, Any] = field(default_factory=dict)


class ToolFailed(Exception):
    """Raised by a tool for a failure the model should read as the call's result."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class Tool(Protocol):
    @property
    def spec(self) -> ToolSpec: ...

    @property
    def source(self) -> str:
        """Where the tool comes from: "builtin", "mcp:<server>" or "agent"."""
        ...

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        """Run the tool. `arguments` already match `spec.parameters` (the registry
        validated them)."""
        ...


class ToolSource(Protocol):
    """A provider of tools with a lifecycle: `start` at gateway start-up (cheap: MCP
    servers connect at first use), `tools` whenever the registry needs the current list
    (a source may refresh it), `aclose` at shutdown."""

    name: str

    async def start(self) -> None: ...

    async def tools(self) -> Sequence[Tool]: ...

    async def aclose(self) -> None: ...


@dataclass(frozen=True, slots=True)
class FunctionTool:
    """A tool made of a spec and an async function: what built-ins are."""

    spec: ToolSpec
    function: Any  # async (arguments, context) -> ToolOutput | str
    source: str = "builtin"

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        result = await self.function(arguments, context)
        return result if isinstance(result, ToolOutput) else ToolOutput(str(result))


@dataclass(slots=True)
class StaticToolSource:
    """A fixed list of tools (built-ins, tests)."""

    name: str
    items: Sequence[Tool]

    async def start(self) -> None:
        return None

    async def tools(self) -> Sequence[Tool]:
        return self.items

    async def aclose(self) -> None:
        return None
