"""`sessiongate serve` as a user runs it, as a subprocess on a free loopback port, its model
an `openai` provider pointed at a local fake server (tests/support/fake_providers.py): for
end-to-end tests of what the gateway does with what a provider streams.

The fake server runs in the test's own event loop, so tests talk to the gateway with an
async client; start-up (adding the user with the CLI, waiting for /health) blocks, which
is harmless because nothing asks the fake server anything until a turn runs.
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
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-c", "from sessiongate.cli.main import app; app()"]


@dataclass(frozen=True)
class ServedGateway:
    url: str
    key: str
    log: Path

    @property
    def auth(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.key}"}

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def write_config(directory: Path, port: int, model_url: str, more: str) -> Path:
    """A configuration whose agents' model is `fake` (openai at `model_url`, no retries),
    followed by `more` (TOML sections: `[agents.main]`, `[limits]`, …)."""
    config = directory / "sg.toml"
    config.write_text(
        f"data_dir = {json.dumps(str(directory / 'data'))}\n"
        f"[server]\nport = {port}\n"
        '[lifecycle]\ntimezone = "UTC"\n'
        '[models.fake]\nprovider = "openai"\nmodel = "fake-model"\n'
        f"base_url = {json.dumps(model_url + '/v1')}\nmax_retries = 0\n"
        '[agents.defaults]\nmodel = "fake"\n'
        f"{more}\n",
        encoding="utf-8",
    )
    return config


def add_user(config: Path, name: str) -> str:
    added = subprocess.run(
        [*CLI, "users", "add", name, "--config", str(config)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert added.returncode == 0, added.stderr
    return added.stdout.strip().splitlines()[-1]


def wait_healthy(url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"serve exited early: {log.read_text(errors='replace')}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            time.sleep(0.1)
    pytest.fail(f"the gateway never answered /health: {log.read_text(errors='replace')}")


@contextmanager
def serve_with_fake_model(
    directory: Path, model_url: str, more: str = ""
) -> Iterator[ServedGateway]:
    """Serve with the user `alice` (not primary) added by the CLI; stopped with SIGTERM
    (SIGKILL if it does not stop) at the end."""
    port = free_port()
    config = write_config(directory, port, model_url, more)
    key = add_user(config, "alice")
    log = directory / "serve.log"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(
            [*CLI, "serve", "--config", str(config)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_healthy(url, proc, log)
        yield ServedGateway(url, key, log)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=5)
