"""Which of the gateway's requests to an MCP server got an answer.

A call is sent again only after a transport failure before any answer (the process
died, the stream closed); a server's own error answer never is a reason, since the call
may have run. The SDK cannot tell the two apart: it reports a connection that closed
under a request as MCPError -32000 (CONNECTION_CLOSED), and -32000 is also JSON-RPC's
generic "server error" that servers answer with. The stream can: `AnswerWatch` sits
between the transport and the `ClientSession`, notes the id of the request a tracked
operation sends, and marks it answered when a response or an error with that id arrives.

Streamable HTTP adds one case: a 404 to a request carrying a session id means the
server no longer knows the session and did not process the request (MCP, "Session
Management"), so sending it again on a new session is safe. `AnswerWatch.on_http_response`
is the HTTP client's response hook that notes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Self

import anyio
import httpx2
import mcp_types as types

from mcp.client._transport import ReadStream, TransportStreams, WriteStream
from mcp.shared.message import SessionMessage

#: The session id header of streamable HTTP (lower case: httpx2 headers compare so).
_SESSION_HEADER = "mcp-session-id"


@dataclass(slots=True)
class TrackedRequest:
    #: The JSON-RPC method whose request is tracked ("tools/call", "tools/list").
    method: str
    #: Its id on the wire, once sent.
    request_id: str | None = None
    #: A response or an error with that id arrived: the server saw the request.
    answered: bool = False
    #: A streamable HTTP server answered it with 404: it did not know the session, and
    #: so did not process the request.
    session_unknown: bool = False
    #: A streamable HTTP server refused it with another 4xx while it carried a session
    #: id: the session may be gone (a server that does not answer 404 as the spec says).
    session_doubtful: bool = False


_TRACKED: ContextVar[TrackedRequest | None] = ContextVar("mcp_tracked_request", default=None)


def _key(request_id: object) -> str:
    # The SDK matches "7" and 7 as one id; so does this.
    return str(request_id)


class AnswerWatch:
    """One connection's view of its requests and of its transport's end."""

    def __init__(self) -> None:
        self._pending: dict[str, TrackedRequest] = {}
        #: The transport's read side ended (EOF, closed): nothing more will arrive.
        self.ended = False

    @contextmanager
    def track(self, method: str) -> Iterator[TrackedRequest]:
        """Track the first `method` request sent from inside the block (in this task)."""
        tracked = TrackedRequest(method)
        token = _TRACKED.set(tracked)
        try:
            yield tracked
        finally:
            _TRACKED.reset(token)
            if tracked.request_id is not None:
                self._pending.pop(tracked.request_id, None)

    def wrap(self, streams: TransportStreams) -> TransportStreams:
        read, write = streams
        return _WatchedRead(read, self), _WatchedWrite(write, self)

    def sent(self, item: SessionMessage) -> None:
        tracked = _TRACKED.get()
        message = item.message
        if (
            tracked is not None
            and tracked.request_id is None
            and isinstance(message, types.JSONRPCRequest)
            and message.method == tracked.method
        ):
            tracked.request_id = _key(message.id)
            self._pending[tracked.request_id] = tracked

    def received(self, item: SessionMessage | Exception) -> None:
        if not isinstance(item, SessionMessage):
            return
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            tracked = self._pending.pop(_key(message.id), None)
            if tracked is not None:
                tracked.answered = True

    async def on_http_response(self, response: httpx2.Response) -> None:
        """httpx2's response hook: notes a 4xx to a request that carried a session id."""
        request = response.request
        if response.status_code < 400 or response.status_code >= 500:
            return
        if _SESSION_HEADER not in request.headers or request.method != "POST":
            return
        try:
            request_id = json.loads(request.content).get("id")
        except Exception:  # a hook that raised would fail the request: just do not note it
            return
        tracked = self._pending.get(_key(request_id)) if request_id is not None else None
        if tracked is None:
            return
        if response.status_code == 404:
            tracked.session_unknown = True
        else:
            tracked.session_doubtful = True


class _WatchedRead:
    """The transport's read stream, seen by the watch on its way to the session."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], watch: AnswerWatch) -> None:
        self._inner = inner
        self._watch = watch

    @property
    def last_context(self) -> Any:  # the SDK reads the sender's context from here
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            item = await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.ended = True
            raise
        self._watch.received(item)
        return item

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


class _WatchedWrite:
    """The transport's write stream: the watch learns the id of a tracked request here,
    in the task that sends it."""

    def __init__(self, inner: WriteStream[SessionMessage], watch: AnswerWatch) -> None:
        self._inner = inner
        self._watch = watch

    async def send(self, item: SessionMessage, /) -> None:
        self._watch.sent(item)
        try:
            await self._inner.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._watch.ended = True
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None
