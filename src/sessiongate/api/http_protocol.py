"""Request limits at the HTTP protocol level, before any ASGI handler or authentication.

uvicorn's httptools protocol buffers a request's headers without bound (one 64 MiB header
costs seconds of CPU and hundreds of MB) and waits forever for headers or a body that a
client sends one byte at a time. `LimitedHttpProtocol` is that protocol with limits:

- **Header size and count** (`limits.max_header_bytes`, `max_header_count`): the bytes
  received while a request's headers are incomplete are counted as they arrive, and the
  request line and headers are measured again as the parser reports them (which catches
  headers that arrive complete in one read). Over either limit the client gets 431 and the
  connection is closed without buffering more. A WebSocket handshake goes through the same
  parser first, so the same limits apply to it.
- **Slow headers** (`header_timeout`): a request's headers must be complete within this
  time of the connection opening (first request) or of the request's first byte (later
  requests on a kept-alive connection). Then 408, or a silent close for a connection that
  never sent a byte. An idle kept-alive connection stays uvicorn's `timeout_keep_alive`
  business.
- **Slow bodies** (`body_timeout`): once the headers are in, the body must keep arriving
  with no gap longer than this; then 408 (or a close, if the response has already begun)
  and the handler's `receive()` reports a disconnect. Time when reading is paused on our
  side (flow control, a pending `100 Continue`) does not count, and the response is never
  timed: a long streamed reply is not cut.

A refusal is written, the sending side shut (so the client reads the answer instead of a
reset), and what the client still sends is discarded for at most `LINGER_SECONDS` before
the connection closes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from typing import ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import STATUS_LINE, HttpToolsProtocol

from sessiongate.api.limits import error_json
from sessiongate.config.limits import LimitsConfig

log = logging.getLogger("sessiongate.http")

#: How long a refused connection keeps reading (and discarding) before it closes, so the
#: client can read the answer before the kernel resets the connection.
LINGER_SECONDS = 2.0
#: Per header, the bytes a parser callback does not report: ": " and CRLF.
_HEADER_OVERHEAD = 4
#: The request line beyond its URL: the method, " HTTP/1.1" and CRLF (an estimate; the raw
#: byte count is exact while the headers are incomplete).
_REQUEST_LINE_OVERHEAD = 20


@dataclass(frozen=True, slots=True)
class RequestLimits:
    max_header_bytes: int
    max_header_count: int
    header_timeout: float
    body_timeout: float

    @classmethod
    def from_config(cls, limits: LimitsConfig) -> RequestLimits:
        return cls(
            max_header_bytes=limits.max_header_bytes,
            max_header_count=limits.max_header_count,
            header_timeout=limits.header_timeout.total_seconds(),
            body_timeout=limits.body_timeout.total_seconds(),
        )


class _Refused(Exception):
    """Raised inside a parser callback to stop parsing a refused request."""


class LimitedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with header, slow-header and slow-body limits.

    `limits` is a class attribute because uvicorn builds one protocol per connection from
    the class it is given (`uvicorn.run(http=...)`); `with_limits` makes a class for one
    set of limits."""

    limits: ClassVar[RequestLimits] = RequestLimits.from_config(LimitsConfig())

    @classmethod
    def with_limits(cls, limits: RequestLimits) -> type[LimitedHttpProtocol]:
        return type(cls.__name__, (cls,), {"limits": limits})

    # uvicorn's protocol has no __slots__; these are plain per-connection attributes.
    _awaiting_headers: bool = True
    _request_begun: bool = False  # its first byte is parsed, its headers are not complete
    _header_bytes: int = 0  # received while the current request's headers are incomplete
    _header_size: int = 0  # request line and headers as the parser reported them
    _header_count: int = 0
    _reading_body: bool = False
    _body_seen_at: float = 0.0
    _discarding: bool = False
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _linger_timer: asyncio.TimerHandle | None = None

    # -- connection ------------------------------------------------------------------

    def connection_made(  # type: ignore[override]
        self, transport: asyncio.Transport
    ) -> None:
        super().connection_made(transport)
        self._header_timer = self.loop.call_later(self.limits.header_timeout, self._header_deadline)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        if self._linger_timer is not None:
            self._linger_timer.cancel()
            self._linger_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._discarding:
            return
        self._unset_keepalive_if_required()
        if self._awaiting_headers:
            self._header_bytes += len(data)
        elif self._reading_body:
            self._body_seen_at = self.loop.time()
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError:
            if self._discarding:  # a callback refused the request and answered already
                return
            msg = "Invalid HTTP request received."
            self.logger.warning(msg)
            self.send_400_response(msg)
            return
        except httptools.HttpParserUpgrade:
            if self._should_upgrade():
                self.handle_websocket_upgrade()
            else:
                self._unsupported_upgrade_warning()
            return
        if self._awaiting_headers:
            if self._header_bytes > self.limits.max_header_bytes:
                self._refuse_headers(f"over {self.limits.max_header_bytes} bytes")
        elif self._reading_body and self._body_timer is None:
            self._body_seen_at = self.loop.time()
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_deadline)

    def handle_websocket_upgrade(self) -> None:
        # The WebSocket protocol takes over the transport: nothing of ours may close it.
        self._cancel_timers()
        super().handle_websocket_upgrade()

    # -- parser callbacks ------------------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._request_begun = True
        self._header_size = _REQUEST_LINE_OVERHEAD
        self._header_count = 0
        if self._header_timer is None:  # a later request on a kept-alive connection
            self._header_timer = self.loop.call_later(
                self.limits.header_timeout, self._header_deadline
            )

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_count += 1
        self._header_size += len(name) + len(value) + _HEADER_OVERHEAD
        if self._header_count > self.limits.max_header_count:
            self._refuse_headers(f"more than {self.limits.max_header_count} headers")
            raise _Refused
        if self._header_size + len(self.url) > self.limits.max_header_bytes:
            self._refuse_headers(f"over {self.limits.max_header_bytes} bytes")
            raise _Refused
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        if self._header_size + len(self.url) > self.limits.max_header_bytes:  # a long URL
            self._refuse_headers(f"over {self.limits.max_header_bytes} bytes")
            raise _Refused
        self._awaiting_headers = False
        self._request_begun = False
        self._header_bytes = 0
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        super().on_headers_complete()
        self._reading_body = True  # until on_message_complete, maybe in this same feed

    def on_message_complete(self) -> None:
        self._reading_body = False
        self._awaiting_headers = True
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # -- deadlines -------------------------------------------------------------------

    def _paused_by_us(self) -> bool:
        """Reading stopped on our side: the client is not the one being slow."""
        cycle = self.cycle
        return self.flow.read_paused or (cycle is not None and cycle.waiting_for_100_continue)

    def _header_deadline(self) -> None:
        self._header_timer = None
        if self._discarding or not self._awaiting_headers or self.transport.is_closing():
            return
        if self._paused_by_us():
            self._header_timer = self.loop.call_later(
                self.limits.header_timeout, self._header_deadline
            )
            return
        cycle = self.cycle
        if not self._request_begun and self._header_bytes == 0:
            self._stop_reading()
            self.transport.close()  # nothing was sent: no answer is owed
        elif cycle is not None and not cycle.response_complete:
            self._stop_reading()
            self.transport.close()  # an answer now would land inside the previous one
        else:
            self._refuse(
                408,
                "request_timeout",
                f"the request headers did not arrive within {self.limits.header_timeout:g}s",
            )

    def _body_deadline(self) -> None:
        self._body_timer = None
        if self._discarding or not self._reading_body or self.transport.is_closing():
            return
        now = self.loop.time()
        if self._paused_by_us():
            self._body_seen_at = now
        due = self._body_seen_at + self.limits.body_timeout
        if now < due:
            self._body_timer = self.loop.call_later(due - now, self._body_deadline)
            return
        cycle = self.cycle
        answered = cycle is None or cycle.response_started
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True  # the handler's receive() returns http.disconnect
            cycle.message_event.set()
        if answered:
            self._stop_reading()
            self.transport.close()
        else:
            self._refuse(
                408,
                "request_timeout",
                f"the request body stopped arriving for {self.limits.body_timeout:g}s",
            )

    def _cancel_timers(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    # -- refusing --------------------------------------------------------------------

    def _refuse_headers(self, what: str) -> None:
        self._refuse(
            431,
            "request_header_fields_too_large",
            f"the request headers are too large: {what}",
        )

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer `status` and close, whatever the client is still sending."""
        self._stop_reading()
        if self.transport.is_closing():
            return
        client = f"{self.client[0]}:{self.client[1]}" if self.client else ""
        log.info("request_refused", extra={"status": status, "code": code, "client": client})
        body = error_json(code, message)
        content = [STATUS_LINE[status]]
        for name, value in self.server_state.default_headers:
            content.extend([name, b": ", value, b"\r\n"])
        content.extend(
            [
                b"content-type: application/json\r\n",
                b"content-length: %d\r\n" % len(body),
                b"connection: close\r\n\r\n",
                body,
            ]
        )
        self.transport.write(b"".join(content))
        if self.transport.can_write_eof():
            # Half-close: the client reads the answer and EOF; its further bytes are read
            # and dropped, since closing with unread data would reset the connection.
            self.transport.write_eof()
            self.flow.resume_reading()
            self._linger_timer = self.loop.call_later(LINGER_SECONDS, self.transport.close)
        else:
            self.transport.close()

    def _stop_reading(self) -> None:
        """No more parsing, no more timers: the connection is on its way out."""
        self._discarding = True
        self._awaiting_headers = False
        self._reading_body = False
        self._cancel_timers()
