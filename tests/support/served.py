"""`sessiongate serve` as a user runs it: a subprocess on a free loopback port, its users
made with the CLI, its model a `command` relay (a Python script on this machine) unless
the test's configuration names another.

One place for what every served test needs, so each test file says only what it serves.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]

#: A reply model that answers `reply from <model> to: <last message>`; the model's name
#: is the relay's first argument, so one script serves several configured models.
ECHO_RELAY = """\
import json, sys
body = json.load(sys.stdin)
content = body["messages"][-1].get("content", "")
if isinstance(content, list):
    content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
first = str(body["messages"][0].get("content", ""))
if first.startswith("You compact the earlier part"):
    # A summary request: the user's lines only, shorter than what it read (a summary no
    # shorter than its span is refused).
    said = [line.split(": ", 1)[1] for line in content.splitlines() if " user: " in line]
    sys.stdout.write(f"summary by {sys.argv[1]}: " + "; ".join(said))
else:
    sys.stdout.write(f"reply from {sys.argv[1]} to: {content}")
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def relay_model(directory: Path, name: str, *, context_window: int | None = None) -> str:
    """A `[models.<name>]` section whose replies name the model that gave them;
    `context_window` set when given (a small one makes compaction come soon)."""
    script = directory / "echo_relay.py"
    if not script.exists():
        script.write_text(ECHO_RELAY, encoding="utf-8")
    command = json.dumps([sys.executable, str(script), name])
    section = f'[models.{name}]\nprovider = "command"\ncommand = {command}\n'
    if context_window is not None:
        section += f"context_window = {context_window}\n"
    return section


def cli(config: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@dataclass
class Served:
    url: str
    config: Path
    log: Path
    proc: subprocess.Popen[bytes]
    keys: dict[str, str] = field(default_factory=dict)

    def auth(self, user: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    def client(self, user: str, timeout: float = 30) -> httpx.Client:
        return httpx.Client(base_url=self.url, headers=self.auth(user), timeout=timeout)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return cli(self.config, *args)

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def add_user(config: Path, name: str, *flags: str) -> str:
    added = cli(config, "users", "add", name, *flags)
    assert added.returncode == 0, added.stderr
    return added.stdout.strip().splitlines()[-1]


def wait_healthy(served: Served, within: float = 60) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if served.proc.poll() is not None:
            pytest.fail(f"serve exited early: {served.stderr()}")
        try:
            if httpx.get(f"{served.url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail(f"the gateway never answered /health: {served.stderr()}")


@contextmanager
def serve_process(
    command: list[str], log: Path, env: dict[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """`command` (a `sessiongate serve …`) in its own session, its stderr in `log`; at the
    end SIGTERM to its whole process group, SIGKILL if it lingers."""
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        yield proc
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)


@contextmanager
def served_gateway(
    directory: Path,
    config_text: str,
    users: dict[str, tuple[str, ...]],
    *args: str,
) -> Iterator[Served]:
    """Serve `config_text` (data_dir, port and timezone are added) after creating
    `users` (name → CLI flags such as `--primary`, `--admin`) with the CLI."""
    port = free_port()
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"{config_text}\n"
        f"[server]\nport = {port}\n"
        '[lifecycle]\ntimezone = "UTC"\n',
        encoding="utf-8",
    )
    keys = {name: add_user(config, name, *flags) for name, flags in users.items()}
    log = directory / "serve.log"
    with serve_process([*CLI, "serve", "--config", str(config), *args], log) as proc:
        served = Served(f"http://127.0.0.1:{port}", config, log, proc, keys)
        wait_healthy(served)
        yield served
