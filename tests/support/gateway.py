"""A real gateway on loopback for transport tests: uvicorn in a thread, real sockets."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import uvicorn

from sessiongate.api.app import create_app
from sessiongate.config import Settings
from sessiongate.models.base import ReplyModel
from sessiongate.service.engine import Engine, build_engine

T = TypeVar("T")
USERS = {
    "prime": (True, False),
    "alice": (False, False),
    "bob": (False, False),
    "root": (False, True),
}


@dataclass
class Gateway:
    url: str
    ws_url: str
    engine: Engine
    keys: dict[str, str]
    #: The SQLite file; None when the gateway runs on PostgreSQL.
    db_path: Path | None
    server: uvicorn.Server = field(repr=False)

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    @property
    def sqlite_file(self) -> Path:
        if self.db_path is None:
            raise RuntimeError("this gateway runs on PostgreSQL: it has no SQLite file")
        return self.db_path


def gateway_settings(tmp_path: Path, **overrides: Any) -> Settings:
    base: dict[str, Any] = {
        "data_dir": tmp_path,
        "lifecycle": {"timezone": "UTC"},
        "agents": {"defaults": {"model": "scripted"}},
        "server": {"ws_auth_timeout": "1s"},
        "limits": {"max_body_bytes": 65536, "max_content_chars": 20000},
    }
    base.update(overrides)
    return Settings(**base)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine to completion even when the caller is inside an event loop."""
    result: list[T] = []
    worker = threading.Thread(target=lambda: result.append(asyncio.run(coro)))
    worker.start()
    worker.join()
    return result[0]


@contextmanager
def running_gateway(
    settings: Settings,
    models: dict[str, ReplyModel],
    *,
    keys: dict[str, str] | None = None,
    port: int = 0,
) -> Iterator[Gateway]:
    """A gateway on loopback over `settings.data_dir`. Without `keys` the users above are
    added; with them (a restart on the same data) the stored users serve."""
    engine = build_engine(settings, models=models)
    if keys is None:
        keys = {}
        for name, (primary, admin) in USERS.items():
            _, keys[name] = run_sync(engine.users.add(name, primary=primary, admin=admin))
    config = uvicorn.Config(
        create_app(engine),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        lifespan="on",
        ws_max_size=settings.limits.ws_transport_max_bytes,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the gateway did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield Gateway(
            f"http://127.0.0.1:{port}",
            f"ws://127.0.0.1:{port}",
            engine,
            keys,
            settings.sqlite_path if settings.database.backend == "sqlite" else None,
            server,
        )
    finally:
        server.should_exit = True
        thread.join(timeout=10)


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    import json

    events = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        if "event" in lines:
            events.append((lines["event"], json.loads(lines["data"])))
    return events
