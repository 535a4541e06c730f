"""MCP servers as a tool source (DESIGN.md §7, "MCP servers" and "Tool names").

An `[mcp.<server>]` entry becomes one `McpToolSource`. Its tools are offered as
`<server>__<tool>` (a tool whose prefixed name breaks the model-facing rule
`^[a-zA-Z0-9_-]{1,64}$` is skipped and logged); the server is called with the tool's own
name.

The rules:
- `start` spawns nothing: the session is opened at first use (the registry asking for
  the tools, or a call), once, under a lock, however many callers arrive together.
- One long-lived session per server (agents/mcp_session.py owns it in a task of its own).
- A call that finds the session gone (the process exited, the HTTP connection dropped,
  the server forgot the session) reconnects once and retries the call once; if that
  fails too, the model reads a ToolFailed saying so. A call that times out is not
  retried (it may still be running); the next use pings the server first and reconnects
  if the ping fails too.
- `notifications/tools/list_changed` marks the list stale; the next `tools()` relists.
- A failed connect is remembered for `retry_backoff` seconds, during which `tools()`
  fails at once instead of making every turn wait for a server that is down; a call
  always tries.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp.client.session import IncomingMessage

from sessiongate.agents.mcp_session import (
    CallTimedOut,
    ConnectFailed,
    Dropped,
    McpConnection,
    ServerError,
)
from sessiongate.agents.tools import Tool, ToolContext, ToolFailed, ToolOutput
from sessiongate.config_tools import TOOL_NAME, McpServerConfig
from sessiongate.models.base import ToolSpec

log = logging.getLogger("sessiongate.mcp")

SEPARATOR = "__"


def prefixed_name(server: str, tool: str) -> str | None:
    """The name a model sees for `tool` of `server`, or None when it cannot be one."""
    name = f"{server}{SEPARATOR}{tool}"
    return name if TOOL_NAME.fullmatch(name) else None


@dataclass(frozen=True, slots=True)
class McpTool:
    spec: ToolSpec
    source: str
    #: The server's own name for the tool.
    remote_name: str
    owner: McpToolSource

    async def call(self, arguments: dict[str, Any], context: ToolContext) -> ToolOutput:
        return await self.owner.call_tool(self.remote_name, arguments)


class McpToolSource:
    """The tools of one MCP server (see the module docstring for the rules)."""

    #: Seconds during which `tools()` repeats a failed connect's error instead of trying.
    retry_backoff: float = 10.0

    def __init__(self, name: str, config: McpServerConfig) -> None:
        self.server = name
        #: The registry's source name; it matches `<server>__*` patterns by this prefix.
        self.name = f"mcp:{name}"
        self.config = config
        self._connection: McpConnection | None = None
        self._lock = asyncio.Lock()
        self._list_lock = asyncio.Lock()
        self._tools: list[McpTool] | None = None
        self._stale = True
        self._failed_at: float | None = None
        self._failure = ""
        self._closed = False
        #: Sessions opened so far (observability, and how tests see "connected once").
        self.connects = 0

    # --- ToolSource ----------------------------------------------------------------

    async def start(self) -> None:
        return None  # connected at first use: an unused server is never started

    async def tools(self) -> Sequence[Tool]:
        if (
            self._failed_at is not None
            and (self._connection is None or not self._connection.usable)
            and time.monotonic() - self._failed_at < self.retry_backoff
        ):
            raise ToolFailed(self._failure)
        connection = await self._connected()
        if self._tools is None or self._stale:
            async with self._list_lock:
                if self._tools is None or self._stale:
                    self._tools = await self._list(connection)
        return self._tools

    async def aclose(self) -> None:
        self._closed = True
        async with self._lock:
            connection, self._connection = self._connection, None
        if connection is not None:
            await connection.aclose()

    # --- the session -----------------------------------------------------------------

    async def _connected(self) -> McpConnection:
        connection = self._connection
        if connection is not None and connection.usable and not connection.suspect:
            return connection
        async with self._lock:
            if self._closed:
                raise ToolFailed(f"the MCP server {self.server!r} is shut down")
            connection = self._connection
            if connection is not None and connection.usable:
                if not connection.suspect:
                    return connection
                # The last call timed out: keep the session only if the server answers.
                if await connection.alive():
                    connection.suspect = False
                    return connection
                log.warning("mcp_server_unresponsive", extra={"server": self.server})
            if connection is not None:
                self._connection = None
                await connection.aclose()
            connection = McpConnection(self.server, self.config, self._on_message)
            try:
                await connection.open()
            except ConnectFailed as exc:
                self._failed_at = time.monotonic()
                self._failure = f"the MCP server {self.server!r} is unavailable: {exc}"
                log.warning("mcp_connect_failed", extra={"server": self.server, "error": str(exc)})
                raise ToolFailed(self._failure) from None
            self._failed_at = None
            self._connection = connection
            self.connects += 1
            self._stale = True  # a new session may serve another list (a restarted server)
            log.info("mcp_connected", extra={"server": self.server})
            return connection

    async def _discard(self, connection: McpConnection) -> None:
        """Forget a session that failed; identity-guarded, so a caller that arrives late
        never throws away the session another caller just opened."""
        async with self._lock:
            if self._connection is connection:
                self._connection = None
        await asyncio.shield(connection.aclose())

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self._stale = True
        elif isinstance(message, Exception):
            log.warning("mcp_transport_error", extra={"server": self.server, "error": str(message)})

    async def _list(self, connection: McpConnection) -> list[McpTool]:
        for attempt in range(2):
            # Cleared before listing, so a change announced while we list is not lost.
            self._stale = False
            try:
                listed = await connection.list_tools()
                break
            except Dropped as exc:
                await self._discard(connection)
                if attempt:
                    raise ToolFailed(
                        f"the MCP server {self.server!r} dropped the connection again: {exc}"
                    ) from None
                connection = await self._connected()
            except (CallTimedOut, ServerError) as exc:
                self._stale = True
                raise ToolFailed(
                    f"the MCP server {self.server!r} did not list its tools: {exc}"
                ) from None
        tools: list[McpTool] = []
        for tool in listed:
            name = prefixed_name(self.server, tool.name)
            if name is None:
                log.warning(
                    "mcp_tool_name_unusable",
                    extra={"server": self.server, "tool": tool.name[:100]},
                )
                continue
            schema: dict[str, Any] = dict(tool.input_schema or {})
            schema.setdefault("type", "object")
            description = tool.description or tool.title or ""
            tools.append(McpTool(ToolSpec(name, description, schema), self.name, tool.name, self))
        return tools

    # --- calls -----------------------------------------------------------------------

    async def call_tool(self, tool: str, arguments: dict[str, Any]) -> ToolOutput:
        """Call the server's tool `tool`; every failure the model should read is a
        ToolFailed naming the server."""
        for attempt in range(2):
            connection = await self._connected()
            try:
                result = await connection.call_tool(tool, arguments)
            except Dropped as exc:
                await self._discard(connection)
                if attempt:
                    raise ToolFailed(
                        f"the MCP server {self.server!r} failed again after a reconnect"
                        f" ({exc}); the call to {tool!r} was not completed"
                    ) from None
                log.warning("mcp_reconnecting", extra={"server": self.server, "error": str(exc)})
                continue
            except CallTimedOut as exc:
                raise ToolFailed(
                    f"the MCP server {self.server!r} did not answer the call to {tool!r}: {exc}"
                ) from None
            except ServerError as exc:
                raise ToolFailed(
                    f"the MCP server {self.server!r} refused the call to {tool!r}: {exc}"
                ) from None
            return tool_output(result)
        raise AssertionError("unreachable")  # pragma: no cover


def tool_output(result: types.CallToolResult) -> ToolOutput:
    """A tool result as the model reads it: text joined by newlines, every other kind of
    content summarized in a line with its type. Images (and audio) keep their base64 in
    `data`, never in the text a model is sent."""
    lines: list[str] = []
    media: list[dict[str, str]] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            lines.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            kind = "image" if isinstance(block, types.ImageContent) else "audio"
            media.append({"kind": kind, "mime_type": block.mime_type, "data": block.data})
            lines.append(f"[{kind}: {block.mime_type}, {_decoded_size(block.data)} bytes]")
        elif isinstance(block, types.ResourceLink):
            kind = block.mime_type or "unknown type"
            lines.append(f"[resource link: {block.uri} ({kind}) {block.name}]")
        elif isinstance(block, types.EmbeddedResource):
            resource = block.resource
            kind = resource.mime_type or "unknown type"
            if isinstance(resource, types.TextResourceContents):
                lines.append(f"[resource: {resource.uri} ({kind})]\n{resource.text}")
            else:
                size = _decoded_size(resource.blob)
                lines.append(f"[resource: {resource.uri} ({kind}), {size} bytes]")
        else:  # a kind a later protocol revision adds
            lines.append(f"[{getattr(block, 'type', 'unknown')} content]")
    data: dict[str, Any] = {}
    if media:
        data["media"] = media
    if result.structured_content is not None:
        data["structured_content"] = result.structured_content
        if not lines:
            lines.append(json.dumps(result.structured_content, ensure_ascii=False))
    return ToolOutput("\n".join(lines), is_error=bool(result.is_error), data=data)


def _decoded_size(data: str) -> int:
    try:
        return len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return len(data) * 3 // 4
