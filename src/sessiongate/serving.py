"""Running the gateway: one process, or several workers sharing a PostgreSQL database.

With `server.workers = 1` the app is built here and served by uvicorn in this process.
With more, uvicorn spawns that many worker processes on one listening socket and each
builds its own app through `create_worker_app`, reading the same configuration: the
parent passes the config file's path in SESSIONGATE_CONFIG, and every other override
already lives in the environment the workers inherit. Per-key serialisation across the
workers comes from the PostgreSQL store's advisory locks, which is why several workers
need PostgreSQL (`cross_check` in config/settings.py refuses SQLite with workers > 1).

Either way uvicorn speaks HTTP through `ServedHttpProtocol`, which refuses oversized
headers and slow clients before any handler runs (api/http_protocol.py).
"""

from __future__ import annotations

import gc
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fastapi import FastAPI

from sessiongate.api.app import create_app
from sessiongate.api.http_protocol import LimitedHttpProtocol, RequestLimits
from sessiongate.api.metrics import MULTIPROCESS_ENV
from sessiongate.config import CONFIG_ENV, Settings, load_settings
from sessiongate.service.engine import Engine, build_engine


def freeze_heap() -> None:
    """Move everything alive at start-up out of the collector's view.

    The modules, schemas and SDK clients loaded at start-up never become garbage, yet
    every full collection walks them again: a pause of 15 to 30 ms on the event loop that
    lands on some unlucky turn's first token. Frozen, they are never scanned again.
    """
    gc.collect()
    gc.freeze()


class ServedHttpProtocol(LimitedHttpProtocol):
    """The HTTP protocol `serve` hands uvicorn. Workers are spawned processes that receive
    this class by name, so each process sets its limits from its own settings
    (`use_limits`): one server per process, one set of limits."""


def use_limits(settings: Settings) -> None:
    ServedHttpProtocol.limits = RequestLimits.from_config(settings.limits)


def create_worker_app() -> FastAPI:
    """The uvicorn factory each worker process calls."""
    settings = load_settings()
    use_limits(settings)  # before uvicorn accepts a connection: it loads the app first
    config_file = os.environ.get(CONFIG_ENV)
    engine = build_engine(settings, config_dir=Path(config_file).parent if config_file else None)
    app = create_app(engine)
    freeze_heap()
    return app


@contextmanager
def worker_environment(config: Path | None) -> Iterator[None]:
    """What the workers need from the parent: the config file and a metrics directory."""
    saved = {name: os.environ.get(name) for name in (CONFIG_ENV, MULTIPROCESS_ENV)}
    metrics_dir = tempfile.mkdtemp(prefix="sessiongate-metrics-")
    try:
        if config is not None:
            os.environ[CONFIG_ENV] = str(config.resolve())
        os.environ[MULTIPROCESS_ENV] = metrics_dir
        yield
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def serve(
    settings: Settings,
    config: Path | None,
    engine: Engine,
    *,
    host: str | None = None,
    port: int | None = None,
) -> None:
    """Block serving HTTP and WebSockets until interrupted. `engine` (already migrated,
    not started on any loop) serves a single process; with several workers each builds
    its own and this one is only closed."""
    import uvicorn

    options: dict[str, Any] = {
        "host": host or settings.server.host,
        "port": port if port is not None else settings.server.port,
        "log_level": "info",
        "access_log": settings.server.access_log,
        "ws_max_size": settings.limits.ws_transport_max_bytes,
        "http": ServedHttpProtocol,
    }
    if settings.server.workers == 1:
        use_limits(settings)
        app = create_app(engine)
        freeze_heap()
        uvicorn.run(app, **options)
        return
    with worker_environment(config):
        uvicorn.run(
            "sessiongate.serving:create_worker_app",
            factory=True,
            workers=settings.server.workers,
            **options,
        )
