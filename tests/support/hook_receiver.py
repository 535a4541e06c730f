"""A real webhook receiver on loopback for the hook tests: `http.server` in a thread that
checks each request's signature the way docs/hooks.md tells a receiver to, and records
what came. It can answer 2xx, fail with a status, hang until released, or not be there
at all (a port nobody listens on, started later)."""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from sessiongate.core.hooks import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    TIMESTAMP_HEADER,
    verify_signature,
)


@dataclass(frozen=True)
class Received:
    at: float  # time.monotonic()
    path: str
    event: str
    delivery: str
    body: dict[str, Any]
    raw: bytes
    headers: dict[str, str]
    signature_ok: bool


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Receiver:
    """`status(n)` answers the n-th request (0-based); `hang` holds every request until
    `release` is set."""

    def __init__(self, secret: bytes, port: int | None = None) -> None:
        self.secret = secret
        self.port = port or free_port()
        self.received: list[Received] = []
        self.attempt_times: list[float] = []
        self.status: Callable[[int], int] = lambda n: 200
        self.hang = False
        self.release = threading.Event()
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                raw = self.rfile.read(length)
                with receiver._lock:
                    number = len(receiver.attempt_times)
                    receiver.attempt_times.append(time.monotonic())
                if receiver.hang:
                    receiver.release.wait(timeout=30)
                code = receiver.status(number)
                headers = {k: v for k, v in self.headers.items()}
                ok = verify_signature(
                    receiver.secret,
                    self.headers.get(TIMESTAMP_HEADER, ""),
                    self.headers.get(SIGNATURE_HEADER, ""),
                    raw,
                    time.time(),
                )
                if 200 <= code < 300:
                    with receiver._lock:
                        receiver.received.append(
                            Received(
                                time.monotonic(),
                                self.path,
                                self.headers.get(EVENT_HEADER, ""),
                                self.headers.get(DELIVERY_HEADER, ""),
                                json.loads(raw),
                                raw,
                                headers,
                                ok,
                            )
                        )
                # A client that gave up (a timeout, a stopped gateway) is gone: fine.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.send_response(code)
                    self.send_header("Content-Length", "2")
                    self.end_headers()
                    self.wfile.write(b"ok")

            def log_message(self, format: str, *args: Any) -> None:
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.release.set()
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)

    def events(self, name: str) -> list[Received]:
        with self._lock:
            return [r for r in self.received if r.event == name]
