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
away and opens a new one (see agents/mcp/source.py for the reconnect rule). Stdio servers run
through agents/mcp/stdio.py (their own process group, killed when the session ends);
agents/mcp/tracking.py tells a request that got an answer from one that did not.
"""

from __future__ import annotations

import asyncio
import logging
import os
import re
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any

import anyio
import httpx2
import mcp_types as types

from mcp import ClientSession, MCPError
from mcp.client._transport import TransportStreams
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from sessiongate import __version__
from sessiongate.agents.mcp.stdio import StdioProcess
from sessiongate.agents.mcp.tracking import AnswerWatch, TrackedRequest
from sessiongate.config.tools import McpServerConfig

log = logging.getLogger("sessiongate.mcp")

#: `${NAME}` anywhere in an `env` or `headers` value is read from the environment.
_REFERENCE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: How long a close waits for the owner task before cutting its goodbye short (a stdio
#: server's grace is about 2 s; an HTTP server's DELETE may hang), and again after.
_CLOSE_LIMIT = 5.0
#: What is added to an SDK-side timeout before our own guard fires: the SDK's timeout is
#: the one that also tells the server to stop, so it should normally win.
_GUARD_SLACK = 2.0


class ConnectFailed(Exception):
    """The server could not be started, reached or initialized; `str()` says why."""


class Dropped(Exception):
    """The session is gone and the request got no answer (the process exited, the
    connection closed, the server forgot the session): it may be sent again."""


class CallTimedOut(Exception):
    pass


class ServerError(Exception):
    """The server answered the request with an error (bad arguments, an unknown tool, any
    JSON-RPC error): reported, never sent again, since the request may have run.
    `session_doubtful`: an HTTP server refused it in a way that may mean it forgot the
    session, so the next request had better open a new one."""

    def __init__(self, message: str, *, session_doubtful: bool = False) -> None:
        super().__init__(message)
        self.session_doubtful = session_doubtful


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
    session is initialized (or raises ConnectFailed); `aclose` stops it and waits;
    `abandon` gives up on it (a hung call): the server is killed at once."""

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
        self.watch = AnswerWatch()
        #: Why the gateway gave up on this session (a call hung); None while it has not.
        self.abandoned: str | None = None
        self._ready = asyncio.Event()
        self._stop = asyncio.Event()
        #: Set when the owner task has left the session and the transport.
        self.closed = asyncio.Event()
        self._error: BaseException | None = None
        self._task: asyncio.Task[None] | None = None
        self._process: StdioProcess | None = None
        #: Cancelled by a close that comes while the handshake runs.
        self._handshake: anyio.CancelScope | None = None
        #: Everything the owner does; cancelled when a close overruns its limit.
        self._owner_scope: anyio.CancelScope | None = None

    @property
    def usable(self) -> bool:
        return (
            self.session is not None
            and not self.closed.is_set()
            and not self.watch.ended
            and self.abandoned is None
        )

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
            await asyncio.shield(self._close(graceful=False))
            raise ConnectFailed(f"no answer to the handshake within {connect_s:g} s") from None
        except BaseException:  # the caller gave up: the owner must not outlive it
            await asyncio.shield(self._close(graceful=False))
            raise
        if self._error is not None or self.session is None:
            await asyncio.shield(self._close(graceful=False))
            raise ConnectFailed(describe(self._error or RuntimeError("no session")))

    async def aclose(self) -> None:
        await self._close(graceful=self.abandoned is None)

    async def abandon(self, why: str) -> None:
        """Give up on this session: it is unusable from now on, and the server's process
        group is killed without the grace period (a server that let a call hang is not
        trusted to exit when asked)."""
        self.abandoned = why
        await self._close(graceful=False)

    async def _close(self, *, graceful: bool) -> None:
        self._stop.set()
        if not graceful and self._process is not None:
            self._process.graceful = False
        if self._handshake is not None:
            self._handshake.cancel()  # still connecting: nothing to hand back
        task = self._task
        if task is None:
            return
        # Waited for, never cancelled natively: the owner's own ending kills the server.
        done, _ = await asyncio.wait({task}, timeout=_CLOSE_LIMIT)
        if not done and self._owner_scope is not None:
            log.warning("mcp_close_forced", extra={"server": self.server})
            self._owner_scope.cancel()  # cut the transport's goodbye; its ending still runs
            done, _ = await asyncio.wait({task}, timeout=_CLOSE_LIMIT)
        if not done:  # only an owner stuck outside anyio's reach gets here
            task.cancel()
            await asyncio.wait({task}, timeout=_CLOSE_LIMIT)

    async def _own(self, env: dict[str, str], headers: dict[str, str]) -> None:
        try:
            with anyio.CancelScope() as self._owner_scope:
                async with AsyncExitStack() as stack:
                    if self.config.command is not None:
                        streams = await self._enter_stdio(stack, env)
                    else:
                        streams = await self._enter_http(stack, headers)
                    session = await stack.enter_async_context(
                        ClientSession(
                            *self.watch.wrap(streams),
                            message_handler=self._on_message,
                            client_info=types.Implementation(
                                name="sessiongate", version=__version__
                            ),
                        )
                    )
                    await self._handshake_with(session)
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

    async def _handshake_with(self, session: ClientSession) -> None:
        """`initialize`, bounded by connect_timeout and cut short by a close. A server
        that fails it is ended without the grace period."""
        connect_s = self.config.connect_timeout.total_seconds()
        try:
            with anyio.CancelScope() as self._handshake, anyio.fail_after(connect_s):
                if self._stop.is_set():  # closed before the handshake began
                    self._handshake.cancel()
                await session.initialize()
            if self._handshake.cancel_called:
                raise ConnectFailed("closed while connecting")
        except TimeoutError:
            self._give_up_process()
            raise ConnectFailed(f"no answer to the handshake within {connect_s:g} s") from None
        except BaseException:
            self._give_up_process()
            raise
        finally:
            self._handshake = None

    def _give_up_process(self) -> None:
        if self._process is not None:
            self._process.graceful = False

    async def _enter_stdio(self, stack: AsyncExitStack, env: dict[str, str]) -> TransportStreams:
        assert self.config.command is not None
        self._process = StdioProcess(self.server)
        try:
            return await stack.enter_async_context(
                self._process.run(self.config.command, self.config.args, env)
            )
        except OSError as exc:
            raise ConnectFailed(f"cannot start {self.config.command!r}: {exc.strerror}") from None

    async def _enter_http(self, stack: AsyncExitStack, headers: dict[str, str]) -> TransportStreams:
        assert self.config.url is not None
        connect_s = self.config.connect_timeout.total_seconds()
        # Reads stay long: the server may hold its event stream open between messages;
        # each request is bounded by the session's own timeouts instead. The response
        # hook tells the answer watch about a server that forgot the session.
        client = httpx2.AsyncClient(
            headers=headers,
            timeout=httpx2.Timeout(connect_s, read=max(300.0, self.config.timeout.total_seconds())),
            event_hooks={"response": [self.watch.on_http_response]},
        )
        await stack.enter_async_context(client)
        return await stack.enter_async_context(
            streamable_http_client(self.config.url, http_client=client)
        )

    # --- requests (any task) -------------------------------------------------------

    def _live(self) -> ClientSession:
        if not self.usable or self.session is None:
            raise Dropped(self.abandoned or "the connection is closed")
        return self.session

    def _classify(self, exc: Exception, tracked: TrackedRequest) -> Exception:
        """What a failed request means. Dropped (the caller may send it again) only when
        no answer to it arrived and the transport failed, or when the server said it
        does not know the session (HTTP 404: the request was not processed). Any answer
        the server gave is a ServerError: the request may have run."""
        if tracked.session_unknown:
            return Dropped("the server no longer knows this session")
        transport_failed = (
            isinstance(exc, MCPError) and exc.code == types.CONNECTION_CLOSED
        ) or isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError | OSError)
        if transport_failed and not tracked.answered:
            return Dropped(describe(exc))
        message = exc.message if isinstance(exc, MCPError) else describe(exc)
        return ServerError(message, session_doubtful=tracked.session_doubtful)

    async def list_tools(self) -> list[types.Tool]:
        session = self._live()
        limit = self.config.list_timeout.total_seconds()
        found: list[types.Tool] = []
        cursor: str | None = None
        try:
            async with asyncio.timeout(limit):
                for _ in range(100):  # a server paging forever is cut off, not followed
                    params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                    with self.watch.track("tools/list") as tracked:
                        try:
                            page = await session.list_tools(params=params)
                        except TimeoutError:
                            raise
                        except Exception as exc:
                            raise self._classify(exc, tracked) from None
                    found.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        break
        except TimeoutError:
            raise CallTimedOut(f"listing tools took longer than {limit:g} s") from None
        return found

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        session = self._live()
        limit = self.config.timeout.total_seconds()
        request = types.CallToolRequest(
            params=types.CallToolRequestParams(name=name, arguments=arguments)
        )
        with self.watch.track("tools/call") as tracked:
            try:
                # The SDK's read timeout also sends the server a cancellation; our guard
                # only matters if something below it stops answering altogether. Sent as
                # a plain request, not `session.call_tool`: that one then checks the
                # result against the tool's output schema with jsonschema on the event
                # loop (the cost core/tool_schema.py bounds for input schemas), listing
                # the tools first when it has not seen them; the gateway does not judge a
                # server's output.
                async with asyncio.timeout(limit + _GUARD_SLACK):
                    return await session.send_request(
                        request, types.CallToolResult, request_read_timeout_seconds=limit
                    )
            except TimeoutError:
                raise CallTimedOut(f"no answer within {limit:g} s") from None
            except MCPError as exc:
                if exc.code == types.REQUEST_TIMEOUT and not tracked.answered:
                    raise CallTimedOut(f"no answer within {limit:g} s") from None
                raise self._classify(exc, tracked) from None
            except Exception as exc:
                raise self._classify(exc, tracked) from None
