"""Server processes for gateway_load.py: starting, readiness, CPU accounting, stopping.

Every server (stub, sessiongate, the LangGraph stack) is this repository's own code run as
`gateway_load.py --role NAME` in a process of its own, so no two share a GIL. It binds an
ephemeral port on 127.0.0.1 and writes a small JSON "ready" file (port, pid, whatever the
client needs) when it accepts connections. The LiteLLM proxy is started by its own CLI
instead (stacks_litellm.py) and wrapped in the same `Child` type.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from support.common import BENCH_DIR, tree_cpu_seconds

HOST = "127.0.0.1"
ENTRY = BENCH_DIR / "gateway_load.py"


@dataclass
class Child:
    """A running server: its process, what its ready file said, and where it logs."""

    name: str
    process: subprocess.Popen[bytes]
    info: dict[str, Any]
    log_path: Path

    @property
    def url(self) -> str:
        return f"http://{HOST}:{self.info['port']}"

    def cpu_seconds(self) -> float:
        """CPU of the process and its children (the LiteLLM CLI may fork workers)."""
        return tree_cpu_seconds(self.process.pid)


def listening_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((HOST, 0))
    sock.listen(2048)
    return sock


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def write_ready(path: str, payload: dict[str, Any]) -> None:
    payload = {**payload, "pid": os.getpid()}
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        os.fchmod(fh.fileno(), 0o600)
        json.dump(payload, fh)
    os.replace(tmp, path)


def _die_with_parent() -> None:
    """Linux: the child gets SIGTERM if this process dies, so nothing is left behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def spawn(
    command: list[str], log_path: Path, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        return subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )


def start_child(
    name: str,
    role_args: list[str],
    workdir: Path,
    timeout: float = 60.0,
    *,
    entry: Path = ENTRY,
) -> Child:
    """Run `<entry> --role ...` (gateway_load.py unless told) and wait for its ready file."""
    ready = workdir / f"{name}.ready.json"
    log_path = workdir / f"{name}.log"
    command = [sys.executable, str(entry), "--role", *role_args, "--ready-file", str(ready)]
    process = spawn(command, log_path)
    deadline = time.monotonic() + timeout
    while not ready.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            stop_child(process)
            tail = log_path.read_text(errors="replace")[-3000:]
            raise RuntimeError(f"{name} did not start (exit {process.returncode}):\n{tail}")
        time.sleep(0.02)
    return Child(name, process, json.loads(ready.read_text()), log_path)


def stop_child(process: subprocess.Popen[bytes], grace: float = 20.0) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def run_server(server: Any, sock: socket.socket, profile_out: str | None) -> None:
    """`server.run` (a uvicorn.Server), under a profiler when asked: `<path>.prof` (cProfile
    with a CPU clock, dumped after a graceful SIGTERM stop) or `<path>.txt` (pyinstrument's
    call tree, wall-clock samples)."""
    # uvicorn re-raises the signal that stopped it once it is done; with the default
    # handler that would kill the process before the profile is written.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    if not profile_out:
        server.run(sockets=[sock])
    elif profile_out.endswith(".txt"):
        # An optional profiler, installed by hand: pip install --target /tmp/x; PYTHONPATH=/tmp/x
        from pyinstrument import Profiler  # type: ignore[import-not-found]

        sampler = Profiler(interval=0.0005, async_mode="disabled")
        sampler.start()
        try:
            server.run(sockets=[sock])
        finally:
            sampler.stop()
            Path(profile_out).write_text(
                sampler.output_text(unicode=False, color=False, show_all=False), encoding="utf-8"
            )
    else:
        import cProfile

        # CPU time, not wall time: on a 2-core box shared with the client and the stub,
        # wall time would charge whatever function was running when the process lost
        # its core.
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        try:
            server.run(sockets=[sock])
        finally:
            profiler.disable()
            profiler.dump_stats(profile_out)
