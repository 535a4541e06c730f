"""Start a child process, wait until it says it is where the test wants it, SIGKILL it.

The crash tests use it: the child writes `ready` at the moment to kill it (mid-turn,
mid tool step), and the test then opens the same data directory in this process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest


def kill_when_ready(script: Path, args: list[str], ready: Path, awaited: str) -> int:
    """Run `script args` (without any SESSIONGATE_* variable), wait for `ready` to exist
    (30 s at most; `awaited` names it in the failure), SIGKILL the child; its pid."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SESSIONGATE_")}
    proc = subprocess.Popen(
        [sys.executable, str(script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    try:
        deadline = time.monotonic() + 30
        while not ready.exists():
            if proc.poll() is not None:
                out, err = proc.communicate(timeout=5)
                pytest.fail(f"child exited early ({proc.returncode}): {out!r} {err!r}")
            if time.monotonic() > deadline:
                pytest.fail(f"child never reported {awaited}")
            time.sleep(0.02)
        assert proc.poll() is None, "the child must still be running when it is killed"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
        assert proc.stdout is not None and proc.stderr is not None
        proc.stdout.close()
        proc.stderr.close()
    return proc.pid
