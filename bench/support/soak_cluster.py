"""The gateways of bench/scale_soak.py: separate `sessiongate serve` processes, each with
its own configuration file, port and data_dir, sharing one PostgreSQL database, started
the way an operator starts them (users made with the CLI), killed with SIGKILL and
restarted on the same port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import httpx

from support.common import tree_cpu_seconds
from support.procs import free_port
from support.stub import STUB_MODEL

CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]


def with_database(url: str, name: str) -> str:
    parts = urlsplit(url)
    return urlunsplit((parts.scheme, parts.netloc, f"/{name}", parts.query, parts.fragment))


def via_port(url: str, port: int) -> str:
    """`url` with its host and port replaced by 127.0.0.1:`port`, TLS off (the counting
    relay reads the protocol)."""
    parts = urlsplit(url)
    user = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
    query = "sslmode=disable"
    return urlunsplit((parts.scheme, f"{user}127.0.0.1:{port}", parts.path, query, ""))


async def admin_sql(url: str, sql: str) -> None:
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def create_database(server_url: str) -> str:
    name = f"sg_soak_{uuid.uuid4().hex[:12]}"
    asyncio.run(admin_sql(server_url, f'CREATE DATABASE "{name}"'))
    return with_database(server_url, name)


def drop_database(server_url: str, database_url: str) -> None:
    name = urlsplit(database_url).path.lstrip("/")
    with contextlib.suppress(Exception):
        asyncio.run(admin_sql(server_url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))


@dataclass
class Gateway:
    name: str
    config: Path
    port: int
    log_path: Path
    process: subprocess.Popen[bytes] | None = None
    #: CPU of processes of this gateway that have ended (a killed one's included).
    cpu_done: float = 0.0
    restarts: int = 0
    #: The CPU of the running process when last sampled (a SIGKILL loses what followed).
    _last_cpu: float = field(default=0.0, repr=False)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def cpu_seconds(self) -> float:
        if self.process is None or self.process.poll() is not None:
            return self.cpu_done
        self._last_cpu = tree_cpu_seconds(self.process.pid)
        return self.cpu_done + self._last_cpu

    def start(self) -> None:
        log = self.log_path.open("ab")
        try:
            self.process = subprocess.Popen(
                [*CLI, "serve", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()

    def wait_healthy(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process is None or self.process.poll() is not None:
                break
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.1)
        tail = self.log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{self.name} did not start:\n{tail}")

    def kill(self) -> None:
        """SIGKILL: no shutdown, no drain; turns in flight die with the process."""
        if self.process is not None and self.process.poll() is None:
            self._last_cpu = tree_cpu_seconds(self.process.pid)
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        self.cpu_done += self._last_cpu
        self._last_cpu = 0.0

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self._last_cpu = tree_cpu_seconds(self.process.pid)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=5)
        self.cpu_done += self._last_cpu
        self._last_cpu = 0.0


def write_config(
    directory: Path, database_url: str, stub_url: str, port: int, pool_size: int
) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"[server]\nport = {port}\n"
        f"[database]\nurl = {json.dumps(database_url)}\npool_size = {pool_size}\n"
        '[lifecycle]\ntimezone = "UTC"\n'
        f'[models.stub]\nprovider = "openai"\nbase_url = "{stub_url}/v1"\n'
        f'model = "{STUB_MODEL}"\nmax_retries = 0\n'
        '[agents.defaults]\nmodel = "stub"\n',
        encoding="utf-8",
    )
    return config


def make_gateways(
    workdir: Path, database_url: str, stub_url: str, count: int, pool_size: int
) -> list[Gateway]:
    gateways = []
    for n in range(count):
        port = free_port()
        directory = workdir / f"gateway{n + 1}"
        config = write_config(directory, database_url, stub_url, port, pool_size)
        gateways.append(Gateway(f"gateway{n + 1}", config, port, directory / "serve.log"))
    return gateways


def add_user(config: Path, name: str, *flags: str) -> str:
    added = subprocess.run(
        [*CLI, "users", "add", name, *flags, "--config", str(config)],
        capture_output=True,
        text=True,
        check=True,
    )
    return added.stdout.strip().splitlines()[-1]
