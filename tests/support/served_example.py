"""One of the shipped examples (examples/<name>.toml) served as a user serves it:
`sessiongate serve --config examples/<name>.toml` in a subprocess started from the
repository's root, the file untouched, only the environment overriding it — the data
directory and port (so tests never touch ./data or port 8080), and the `reply` and
`control` models pointed at a local stub through `SESSIONGATE_MODELS__*__BASE_URL`, as the
examples tell their readers to point them at a real server.

Users are made with the CLI on the same configuration and environment before the
gateway starts (so it creates no bootstrap admin of its own).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.support.served import CLI, ROOT, Served, free_port, serve_process, wait_healthy

EXAMPLES = ROOT / "examples"
#: The model names the stub sees, whatever the example's file names.
REPLY_MODEL = "stub-reply"
CONTROL_MODEL = "stub-control"


def sessiongate_command() -> list[str]:
    """The installed `sessiongate` program beside this interpreter, as a user runs it."""
    program = Path(sys.executable).parent / "sessiongate"
    return [str(program)] if program.exists() else list(CLI)


def example_environment(directory: Path, port: int, model_url: str) -> dict[str, str]:
    """This process's environment without any SESSIONGATE_* of its own, plus the
    overrides every served example gets."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONGATE_")}
    env.update(
        {
            "SESSIONGATE_DATA_DIR": str(directory / "data"),
            "SESSIONGATE_SERVER__PORT": str(port),
            "SESSIONGATE_LIFECYCLE__TIMEZONE": "UTC",
            "SESSIONGATE_MODELS__REPLY__BASE_URL": f"{model_url}/v1",
            "SESSIONGATE_MODELS__REPLY__MODEL": REPLY_MODEL,
            "SESSIONGATE_MODELS__REPLY__MAX_RETRIES": "0",
            "SESSIONGATE_MODELS__CONTROL__BASE_URL": f"{model_url}/v1",
            "SESSIONGATE_MODELS__CONTROL__MODEL": CONTROL_MODEL,
            "SESSIONGATE_MODELS__CONTROL__MAX_RETRIES": "0",
        }
    )
    return env


@dataclass
class ServedExample:
    name: str
    served: Served
    env: dict[str, str] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return self.served.url

    @property
    def ws_url(self) -> str:
        return "ws" + self.served.url.removeprefix("http")

    def auth(self, user: str) -> dict[str, str]:
        return self.served.auth(user)

    def client(self, user: str | None = None, timeout: float = 30) -> httpx.Client:
        headers = self.auth(user) if user is not None else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=timeout)

    def cli(self, *args: str) -> subprocess.CompletedProcess[str]:
        return run_cli(self.served.config, self.env, *args)

    def stderr(self) -> str:
        return self.served.stderr()


def run_cli(config: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*sessiongate_command(), *args, "--config", str(config)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


@contextmanager
def served_example(
    name: str,
    directory: Path,
    model_url: str,
    users: dict[str, tuple[str, ...]],
    env: dict[str, str] | None = None,
) -> Iterator[ServedExample]:
    """Serve examples/<name>.toml with `users` (name → CLI flags) made first; `env` adds
    to (or replaces) the overrides. Stopped with SIGTERM (SIGKILL if it lingers)."""
    config = EXAMPLES / f"{name}.toml"
    assert config.is_file(), config
    port = free_port()
    environment = example_environment(directory, port, model_url) | (env or {})
    keys = {}
    for user, flags in users.items():
        added = run_cli(config, environment, "users", "add", user, *flags)
        assert added.returncode == 0, added.stderr
        keys[user] = added.stdout.strip().splitlines()[-1]
    log = directory / "serve.log"
    command = [*sessiongate_command(), "serve", "--config", str(config)]
    with serve_process(command, log, environment) as proc:
        served = Served(f"http://127.0.0.1:{port}", config, log, proc, keys)
        wait_healthy(served)
        yield ServedExample(name, served, environment)


def have(program: str) -> bool:
    return shutil.which(program) is not None
