"""A real WebDAV server on loopback for the artifact copy tests: wsgidav (from PyPI) with
its filesystem provider over a temporary folder and basic authentication, under cheroot in
a thread. It can start on a port chosen beforehand (the gateway is pointed at a server that
is down, which then comes up), and can hold every PUT until a test lets it through."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from cheroot import wsgi
from wsgidav.wsgidav_app import WsgiDAVApp

USER = "gateway"
PASSWORD = "app-password-1"

StartResponse = Callable[..., Any]


def free_port() -> int:
    """A port nothing listens on (yet): bound, read and closed."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class DavServer:
    def __init__(self, root: Path, port: int = 0) -> None:
        self.root = root
        self.port = port
        root.mkdir(parents=True, exist_ok=True)
        self._server: wsgi.Server | None = None
        self._thread: threading.Thread | None = None
        #: Clear it to hold PUTs (until set again); `put_waiting` is set when one waits.
        self.put_open = threading.Event()
        self.put_open.set()
        self.put_waiting = threading.Event()
        #: (method, path) of every request, in order.
        self.requests: list[tuple[str, str]] = []

    def url(self, folder: str = "sessiongate/") -> str:
        return f"http://127.0.0.1:{self.port}/{folder}"

    def _app(self) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
        dav = WsgiDAVApp(
            {
                "provider_mapping": {"/": str(self.root)},
                "http_authenticator": {
                    "domain_controller": None,  # the simple one, over user_mapping
                    "accept_basic": True,
                    "accept_digest": False,
                    "default_to_digest": False,
                },
                "simple_dc": {"user_mapping": {"*": {USER: {"password": PASSWORD}}}},
                "verbose": 0,
                "logging": {"enable": False},
                "property_manager": None,
                "lock_storage": None,
                "dir_browser": {"enable": False},
            }
        )

        def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
            method = environ["REQUEST_METHOD"]
            self.requests.append((method, environ.get("PATH_INFO", "")))
            if method == "PUT" and not self.put_open.is_set():
                self.put_waiting.set()
                self.put_open.wait(30)
            result: Iterable[bytes] = dav(environ, start_response)
            return result

        return app

    def start(self) -> DavServer:
        server = wsgi.Server(("127.0.0.1", self.port), self._app(), numthreads=4)
        server.prepare()
        self.port = server.bind_addr[1]
        self._server = server
        self._thread = threading.Thread(target=server.serve, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self.put_open.set()
        if self._server is not None:
            self._server.stop()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._server = self._thread = None

    def file(self, remote_path: str, folder: str = "sessiongate") -> Path:
        return self.root / folder / remote_path
