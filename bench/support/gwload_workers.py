"""The gateway as `sessiongate serve` runs it with several workers on PostgreSQL, for
bench/gateway_load.py (`--postgres-url URL --workers N`).

It is started the way an operator starts it: a TOML config file, `sessiongate users add`
for the API key, `sessiongate serve`, each in a fresh database created on the given
server (the role needs CREATEDB) and dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from support.common import tree_cpu_seconds

CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]


def _with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


async def _admin(url: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@dataclass
class WorkersChild:
    """Looks like procs.Child to the driver: name, url, info, process, cpu_seconds()."""

    name: str
    process: subprocess.Popen[bytes]
    info: dict[str, Any]
    database_url: str
    server_url: str
    log_path: Path
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.info['port']}"

    def cpu_seconds(self) -> float:
        return tree_cpu_seconds(self.process.pid)


def start_workers(
    server_url: str, workers: int, stub_url: str, model: str, workdir: Path
) -> WorkersChild:
    name = f"sg_bench_{uuid.uuid4().hex[:12]}"
    asyncio.run(_admin(server_url, f'CREATE DATABASE "{name}"'))
    database_url = _with_database(server_url, name)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    config = workdir / "workers.toml"
    config.write_text(
        f'data_dir = "{workdir / "workers-data"}"\n'
        f"[server]\nport = {port}\nworkers = {workers}\n"
        f'[database]\nurl = "{database_url}"\npool_size = 64\n'
        '[lifecycle]\ntimezone = "UTC"\n'
        f'[models.stub]\nprovider = "openai"\nbase_url = "{stub_url}/v1"\nmodel = "{model}"\n'
        '[agents.defaults]\nmodel = "stub"\n',
        encoding="utf-8",
    )
    added = subprocess.run(
        [*CLI, "users", "add", "bench", "--primary", "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
    )
    api_key = added.stdout.strip().splitlines()[-1]
    log_path = workdir / "workers.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [*CLI, "serve", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    child = WorkersChild(
        "sessiongate-pg",
        process,
        {"port": port, "api_key": api_key},
        database_url,
        server_url,
        log_path,
    )
    _wait_healthy(child)
    return child


def _wait_healthy(child: WorkersChild, timeout: float = 90.0) -> None:
    import httpx

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if child.process.poll() is not None:
            break
        with contextlib.suppress(httpx.TransportError):
            if httpx.get(f"{child.url}/health", timeout=1).status_code == 200:
                return
        time.sleep(0.2)
    stop_workers(child)
    raise RuntimeError(f"sessiongate serve did not start:\n{child.log_path.read_text()[-3000:]}")


def stop_workers(child: WorkersChild) -> None:
    if child.process.poll() is None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.process.pid, signal.SIGTERM)
        try:
            child.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(child.process.pid, signal.SIGKILL)
            child.process.wait(timeout=5)
    name = urlsplit(child.database_url).path.lstrip("/")
    with contextlib.suppress(Exception):
        asyncio.run(_admin(child.server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
