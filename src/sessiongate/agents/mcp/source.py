"""MCP servers as a tool source (DESIGN.md §7, "MCP servers" and "Tool names").

An `[mcp.<server>]` entry becomes one `McpToolSource`. Its tools are offered as
`<server>__<tool>` (a tool whose prefixed name breaks the model-facing rule
`^[a-zA-Z0-9_-]{1,64}$` is skipped and logged); the server is called with the tool's own
name.

The rules:
- `start` spawns nothing: the session is opened at first use (the registry asking for
  the tools, or a call), once, under a lock, however many callers arrive together.
  `aclose` ends the session and refuses new ones until `start` again: the CLI starts
  and stops an engine on one event loop, then serves on another.
- One long-lived session per server (agents/mcp/session.py owns it in a task of its own).
- A call is sent again only when the session failed before any answer to it: the
  process exited, the connection closed, or the server said it forgot the session
  (HTTP 404). It is sent once more, on a new session; if that fails too, the model
  reads a ToolFailed saying so. An error the server answered with is never a reason to
  send a call again (the call may have run).
- A call that times out is not sent again (it may still be running), and the server is
  not trusted any more: the session is abandoned (its process group killed) and the
  next use connects anew. Calls still waiting on that session fail without a resend.
- `notifications/tools/list_changed` marks the list stale; the next `tools()` relists.
- A server that fails to connect or to list its tools is remembered for its
  `retry_backoff` (10 s by default), during which `tools()` fails at once: a turn offers
  nothing from it and waits for nothing. Callers that queued behind a failing connect
  share its failure instead of each trying again; a call that comes later tries.
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
from sessiongate.agents.mcp.session import (
    CallTimedOut,
    ConnectFailed,
    Dropped,
    McpConnection,
    ServerError,
)
from sessiongate.agents.tools import Tool, ToolContext, ToolFailed, ToolOutput
from sessiongate.config.tools import TOOL_NAME, McpServerConfig
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

    def __init__(self, name: str, config: McpServerConfig) -> None:
        self.server = name
        #: The registry's source name; it matches `<server>__*` patterns by this prefix.
        self.name = f"mcp:{name}"
        self.config = config
        #: Seconds during which `tools()` repeats a failure instead of trying.
        self.retry_backoff = config.retry_backoff.total_seconds()
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
        """Ready to connect at first use, on this event loop (also after an `aclose`).
        Spawns nothing: an unused server is never started."""
        self._lock = asyncio.Lock()
        self._list_lock = asyncio.Lock()
        self._closed = False

    async def tools(self) -> Sequence[Tool]:
        self._refuse_within_backoff()
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

    def _refuse_within_backoff(self, since: float | None = None) -> None:
        """ToolFailed with the last failure while the back-off lasts (`since`: only when
        that failure came after this moment)."""
        failed_at = self._failed_at
        if failed_at is None or time.monotonic() - failed_at >= self.retry_backoff:
            return
        if since is None or failed_at >= since:
            raise ToolFailed(self._failure)

    def _remember_failure(self, failure: str) -> None:
        self._failed_at = time.monotonic()
        self._failure = failure

    async def _connected(self) -> McpConnection:
        connection = self._connection
        if connection is not None and connection.usable:
            return connection
        arrived = time.monotonic()
        async with self._lock:
            if self._closed:
                raise ToolFailed(f"the MCP server {self.server!r} is shut down")
            connection = self._connection
            if connection is not None and connection.usable:
                return connection
            # A connect that failed while we waited for the lock was our attempt too.
            self._refuse_within_backoff(since=arrived)
            if connection is not None:
                self._connection = None
                await connection.aclose()
            connection = McpConnection(self.server, self.config, self._on_message)
            try:
                await connection.open()
            except ConnectFailed as exc:
                self._remember_failure(f"the MCP server {self.server!r} is unavailable: {exc}")
                log.warning("mcp_connect_failed", extra={"server": self.server, "error": str(exc)})
                raise ToolFailed(self._failure) from None
            self._failed_at = None
            self._connection = connection
            self.connects += 1
            self._stale = True  # a new session may serve another list (a restarted server)
            log.info("mcp_connected", extra={"server": self.server})
            return connection

    async def _discard(self, connection: McpConnection, *, abandon: str | None = None) -> None:
        """Forget a session that failed (`abandon`: kill its server at once, saying why);
        identity-guarded, so a caller that arrives late never throws away the session
        another caller just opened."""
        async with self._lock:
            if self._connection is connection:
                self._connection = None
        if abandon is not None:
            await asyncio.shield(connection.abandon(abandon))
        else:
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
                    failure = f"the MCP server {self.server!r} dropped the connection again: {exc}"
                    self._remember_failure(failure)
                    raise ToolFailed(failure) from None
                connection = await self._connected()
            except (CallTimedOut, ServerError) as exc:
                # A server that cannot list its tools offers nothing; one that hangs is
                # ended. Either way later turns skip it until the back-off ends.
                self._stale = True
                await self._discard(connection, abandon=f"listing failed: {exc}")
                failure = f"the MCP server {self.server!r} did not list its tools: {exc}"
                self._remember_failure(failure)
                raise ToolFailed(failure) from None
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
                if connection.abandoned is not None:
                    raise ToolFailed(
                        f"the MCP server {self.server!r} was restarted ({connection.abandoned})"
                        f" before it answered; the call to {tool!r} was not completed"
                    ) from None
                if attempt:
                    raise ToolFailed(
                        f"the MCP server {self.server!r} failed again after a reconnect"
                        f" ({exc}); the call to {tool!r} was not completed"
                    ) from None
                log.warning("mcp_reconnecting", extra={"server": self.server, "error": str(exc)})
                continue
            except CallTimedOut as exc:
                # The server let a call hang: do not wait on it again (no health ping on
                # a stuck session); the next use starts it anew.
                log.warning("mcp_call_timed_out", extra={"server": self.server, "tool": tool})
                await self._discard(connection, abandon=f"a call to {tool!r} hung")
                raise ToolFailed(
                    f"the MCP server {self.server!r} did not answer the call to {tool!r}: {exc}"
                ) from None
            except ServerError as exc:
                if exc.session_doubtful:
                    await self._discard(connection)  # the next call opens a new session
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
