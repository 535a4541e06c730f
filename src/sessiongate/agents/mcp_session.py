"""One live MCP session with one server, owned by one dedicated task.

The SDK's transports and `ClientSession` are anyio context managers holding task groups
and cancel scopes, which must be entered and exited by the same task. A turn's task
cannot own them (turns end; the session outlives them), so each connection runs an owner
task that enters the transport and the session, initializes, parks until told to stop and
then leaves everything in reverse order. Callers in any task talk to the server through
the `ClientSession` object: its requests are memory-stream messages, so they are not tied
to the owner task.

A connection that dies (the server process exits, the HTTP server goes away) is never
repaired in place: the caller classifies the failure (`Dropped`), throws the connection
away and opens a new one (see agents/mcp.py for the reconnect rule).
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
import threading
from collections.abc import Mapping
from contextlib import AsyncExitStack, suppress
from typing import IO, Any

import anyio
import httpx2
import mcp_types as types
from mcp import ClientSession, MCPError, StdioServerParameters, stdio_client
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client

from sessiongate import __version__
from sessiongate.config_tools import McpServerConfig

log = logging.getLogger("sessiongate.mcp")

#: `${NAME}` anywhere in an `env` or `headers` value is read from the environment.
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: The longest wait for a connection's owner task to finish leaving its context managers
#: (the SDK bounds its own stdio shutdown to a few seconds; this is the backstop).
_CLOSE_LIMIT = 10.0
#: What is added to an SDK-side timeout before our own guard fires: the SDK's timeout is
#: the one that also tells the server to stop, so it should normally win.
_GUARD_SLACK = 2.0
#: One stderr line of a stdio server, as logged.
_STDERR_LINE_LIMIT = 2000


class ConnectFailed(Exception):
    """The server could not be started, reached or initialized; `str()` says why."""


class Dropped(Exception):
    """The session is gone (the process exited, the connection closed, the server forgot
    the session): the caller may reconnect and retry."""


class CallTimedOut(Exception):
    pass


class ServerError(Exception):
    """The server answered a request with a JSON-RPC error while the session stays
    healthy (bad arguments, an unknown tool): reported, never retried."""


def resolve_references(values: Mapping[str, str], what: str) -> dict[str, str]:
    """`values` with every `${NAME}` replaced by the environment's value; a missing
    variable is a ConnectFailed naming it (the secret itself never appears)."""
    resolved: dict[str, str] = {}
    for key, value in values.items():
        missing = [n for n in _REFERENCE.findall(value) if n not in os.environ]
        if missing:
            raise ConnectFailed(
                f"{what} {key!r} refers to ${{{missing[0]}}}, which is not set in the"
                " gateway's environment"
            )
        resolved[key] = _REFERENCE.sub(lambda m: os.environ[m.group(1)], value)
    return resolved


def leaf(exc: BaseException) -> BaseException:
    """The first real failure inside the exception groups anyio's task groups wrap
    failures in."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def describe(exc: BaseException) -> str:
    """A one-line reason for a failure."""
    exc = leaf(exc)
    if isinstance(exc, ConnectFailed):
        return str(exc)
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, MCPError):
        if exc.code == types.CONNECTION_CLOSED:
            return "the server closed the connection"
        return f"the server answered with error {exc.code}: {exc.message}"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class McpConnection:
    """One session with one server. `open` starts the owner task and returns once the
    session is initialized (or raises ConnectFailed); `aclose` stops it and waits."""

    def __init__(
        self,
        server: str,
        config: McpServerConfig,
        on_message: MessageHandlerFnT,
    ) -> None:
        self.server = server
        self.config = config
        self._on_message = on_message
        self.session: ClientSession | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        #: Set when the owner task has left the session and the transport.
        self.closed = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        #: A call timed out: the server may be hung, so the next use pings it first.
        self.suspect = False

    @property
    def usable(self) -> bool:
        return self.session is not None and not self.closed.is_set()

    async def open(self) -> None:
        env = resolve_references(self.config.env, "env")
        headers = resolve_references(self.config.headers, "header")
        self._task = asyncio.create_task(self._own(env, headers), name=f"mcp:{self.server}")
        connect_s = self.config.connect_timeout.total_seconds()
        try:
            # The owner bounds the handshake itself; this guard only covers a transport
            # that does not even get that far.
            async with asyncio.timeout(connect_s + _GUARD_SLACK):
                await self._ready.wait()
        except TimeoutError:
            await asyncio.shield(self.aclose())
            raise ConnectFailed(f"no answer to the handshake within {connect_s:g} s") from None
        except BaseException:  # the caller gave up: the owner must not outlive it
            await asyncio.shield(self.aclose())
            raise
        if self._error is not None or self.session is None:
            await asyncio.shield(self.aclose())
            raise ConnectFailed(describe(self._error or RuntimeError("no session")))

    async def aclose(self) -> None:
        self._stop.set()
        task = self._task
        if task is None or task.done():
            return
        if not self._ready.is_set():
            # Still connecting: nothing to hand back, so do not wait out the handshake.
            # The SDK's stdio shutdown is shielded, so a spawned process is still ended.
            task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(task), _CLOSE_LIMIT)
        except TimeoutError:
            log.warning("mcp_close_forced", extra={"server": self.server})
            task.cancel()
            with suppress(asyncio.CancelledError):
                await task

    async def _own(self, env: dict[str, str], headers: dict[str, str]) -> None:
        try:
            async with AsyncExitStack() as stack:
                if self.config.command is not None:
                    read, write = await self._enter_stdio(stack, env)
                else:
                    read, write = await self._enter_http(stack, headers)
                session = await stack.enter_async_context(
                    ClientSession(
                        read,
                        write,
                        message_handler=self._on_message,
                        client_info=types.Implementation(name="sessiongate", version=__version__),
                    )
                )
                try:
                    with anyio.fail_after(self.config.connect_timeout.total_seconds()):
                        await session.initialize()
                except TimeoutError:
                    raise ConnectFailed(
                        "no answer to the handshake within"
                        f" {self.config.connect_timeout.total_seconds():g} s"
                    ) from None
                self.session = session
                self._ready.set()
                await self._stop.wait()
        except BaseException as exc:  # recorded for `open`, or logged: never lost
            if not self._ready.is_set():
                self._error = ConnectFailed(describe(exc))
            elif not self._stop.is_set():
                log.warning(
                    "mcp_connection_lost", extra={"server": self.server, "error": describe(exc)}
                )
            if isinstance(exc, asyncio.CancelledError):
                raise
        finally:
            self.closed.set()
            self._ready.set()

    async def _enter_stdio(self, stack: AsyncExitStack, env: dict[str, str]) -> Any:
        assert self.config.command is not None
        params = StdioServerParameters(command=self.config.command, args=self.config.args, env=env)
        # The server's stderr goes to a pipe read by a thread that logs each line: what a
        # server prints for its operator belongs in the gateway's log, never to a client.
        # The thread ends at end of file, when the server (and anything it spawned) is gone.
        read_fd, write_fd = os.pipe()
        reader = threading.Thread(
            target=_log_lines,
            args=(os.fdopen(read_fd, "rb"), self.server),
            name=f"mcp-stderr:{self.server}",
            daemon=True,
        )
        reader.start()
        errlog = os.fdopen(write_fd, "w")
        try:
            return await stack.enter_async_context(stdio_client(params, errlog=errlog))
        except OSError as exc:
            raise ConnectFailed(f"cannot start {self.config.command!r}: {exc.strerror}") from None
        finally:
            errlog.close()  # the child holds its own copy; ours would keep the pipe open

    async def _enter_http(self, stack: AsyncExitStack, headers: dict[str, str]) -> Any:
        assert self.config.url is not None
        connect_s = self.config.connect_timeout.total_seconds()
        # Reads stay long: the server may hold its event stream open between messages;
        # each request is bounded by the session's own timeouts instead.
        client = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(connect_s, read=max(300.0, self.config.timeout.total_seconds())),
        )
        await stack.enter_async_context(client)
        return await stack.enter_async_context(
            streamable_http_client(self.config.url, http_client=client)
        )

    # --- requests (any task) -------------------------------------------------------

    def _live(self) -> ClientSession:
        if self.session is None or self.closed.is_set():
            raise Dropped("the connection is closed")
        return self.session

    async def alive(self) -> bool:
        """Whether the server still answers a ping on this session."""
        try:
            session = self._live()
            async with asyncio.timeout(self.config.list_timeout.total_seconds()):
                await session.send_ping()
        except Exception:
            return False
        return True

    async def _classify(self, exc: Exception) -> Exception:
        """What a failed request means: the session is gone (Dropped), or the server
        refused this one request (ServerError)."""
        if isinstance(exc, MCPError):
            if exc.code == types.CONNECTION_CLOSED:
                return Dropped("the server closed the connection")
            # A streamable HTTP server that restarted answers with an error about an
            # unknown session (404 or 400, depending on the server); a ping on the same
            # session tells that apart from an error about this request.
            if await self.alive():
                return ServerError(exc.message)
            return Dropped(f"the server no longer knows this session ({exc.message})")
        if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError):
            return Dropped(describe(exc))
        return ServerError(describe(exc))

    async def list_tools(self) -> list[types.Tool]:
        session = self._live()
        limit = self.config.list_timeout.total_seconds()
        found: list[types.Tool] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(limit):
                for _ in range(100):  # a server paging forever is cut off, not followed
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    page = await session.list_tools(params=params)
                    found.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError:
            raise CallTimedOut(f"listing tools took longer than {limit:g} s") from None
        except Exception as exc:
            raise await self._classify(exc) from None
        return found

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        session = self._live()
        limit = self.config.timeout.total_seconds()
        try:
            # The SDK's read timeout also sends the server a cancellation; our guard only
            # matters if something below it stops answering altogether.
            async with asyncio.timeout(limit + _GUARD_SLACK):
                return await session.call_tool(name, arguments, read_timeout_seconds=limit)
        except TimeoutError:
            self.suspect = True
            raise CallTimedOut(f"no answer within {limit:g} s") from None
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                self.suspect = True
                raise CallTimedOut(f"no answer within {limit:g} s") from None
            raise await self._classify(exc) from None
        except Exception as exc:
            raise await self._classify(exc) from None


def _log_lines(stream: IO[bytes], server: str) -> None:
    with stream:
        for raw in stream:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                log.info(
                    "mcp_server_stderr",
                    extra={"server": server, "line": line[:_STDERR_LINE_LIMIT]},
                )
