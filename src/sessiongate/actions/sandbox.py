"""Running a model-written Python script on the gateway host (`actions = "sandbox"`).

`build_sandbox` checks at start-up that bubblewrap and the interpreter are there and that
a probe script runs confined (bwrap.py says how); it raises `SandboxUnavailable` rather
than ever run a script unconfined. `ScriptRunner.run` then runs one script:

- in a fresh scratch directory (scratch.py), the script passed as a file, never on a
  command line, and no shell anywhere;
- under resource limits the prelude applies inside (limits.py, prelude.py);
- killed with its whole process group when `wall_timeout` passes (bwrap and the sandbox's
  init die; the pid namespace takes every other process of the script with it), or when
  it writes far more than `max_output_chars` (output.py keeps only that much);
- at most `max_concurrent` at once; one more raises `SandboxBusy` at once.

Everything is asynchronous: a hostile script costs the event loop two pipe readers.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import subprocess
import time
from pathlib import Path

from sessiongate.actions.bwrap import (
    SANDBOX_GID,
    SANDBOX_UID,
    SCRIPT_NAME,
    WORKDIR,
    Host,
    command,
    find_host,
)
from sessiongate.actions.errors import SandboxBusy, SandboxUnavailable
from sessiongate.actions.limits import PRELUDE_SOURCE, ScriptEnd, ScriptLimits
from sessiongate.actions.output import CappedOutput
from sessiongate.actions.process import (
    GONE_SECONDS,
    RunningScript,
    init_pid,
    output_ceiling,
    pump,
    read_ready,
    wait_gone,
)
from sessiongate.actions.result import (
    CANCELLED,
    CLOSED,
    MEMORY_LIMIT,
    WALL_TIMEOUT,
    ActionResult,
    ScriptRunner,
)
from sessiongate.actions.scratch import new_scratch, prepare_root, remove_tree
from sessiongate.config.routing import SandboxConfig

__all__ = [
    "ActionResult",
    "BwrapSandbox",
    "SandboxBusy",
    "SandboxUnavailable",
    "ScriptRunner",
    "build_sandbox",
]

log = logging.getLogger("sessiongate.actions")

#: Once the sandbox is gone its pipes close at once; this only bounds a surprise.
_DRAIN_SECONDS = 5.0
_PROBE_SECONDS = 30.0
_PROBE_SCRIPT = "import os, sys\nprint(os.getuid(), os.getgid(), sys.version_info >= (3, 9))\n"
_PROBE_EXPECTED = f"{SANDBOX_UID} {SANDBOX_GID} True"
#: bwrap itself needs no environment: the gateway's (API keys) never reaches even bwrap.
_BWRAP_ENV: dict[str, str] = {}


class BwrapSandbox:
    """The ScriptRunner over bubblewrap; made by `build_sandbox`."""

    name = "bwrap"

    def __init__(self, config: SandboxConfig, scratch_root: Path, host: Host) -> None:
        self.config = config
        self.scratch_root = scratch_root
        self.host = host
        self.limits = ScriptLimits.from_config(config, helper_processes=host.helper_processes)
        self._runs: set[RunningScript] = set()
        self._closed = False

    async def run(self, script: str) -> ActionResult:
        if self._closed:
            raise SandboxUnavailable("the sandbox is shut down")
        if len(self._runs) >= self.config.max_concurrent:
            raise SandboxBusy(
                f"{len(self._runs)} scripts are running already"
                f" (actions.max_concurrent = {self.config.max_concurrent}); try again shortly"
            )
        run = RunningScript()
        self._runs.add(run)  # before any await: the count above stays exact
        try:
            scratch = self._new_scratch(script)
            try:
                return await self._execute(run, scratch)
            finally:
                await asyncio.to_thread(remove_tree, scratch)
        finally:
            self._runs.discard(run)
            run.finished.set()

    async def aclose(self) -> None:
        self._closed = True
        runs = list(self._runs)
        for run in runs:
            run.kill(CLOSED)
        waiters = [asyncio.create_task(run.finished.wait()) for run in runs]
        if waiters:
            await asyncio.wait(waiters, timeout=GONE_SECONDS + _DRAIN_SECONDS)
            for waiter in waiters:
                waiter.cancel()

    def probe(self) -> None:
        """Run a tiny script confined, synchronously (start-up); SandboxUnavailable with
        bwrap's own words when it cannot."""
        scratch = self._new_scratch(_PROBE_SCRIPT)
        status_r, status_w = os.pipe()
        info_r, info_w = os.pipe()
        try:
            done = subprocess.run(
                self._argv(scratch, status_fd=status_w, info_fd=info_w),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                pass_fds=(status_w, info_w),
                start_new_session=True,
                env=_BWRAP_ENV,
                timeout=_PROBE_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SandboxUnavailable(f"bubblewrap ({self.host.bwrap}) failed: {exc}") from None
        finally:
            for fd in (status_r, status_w, info_r, info_w):
                os.close(fd)
            remove_tree(scratch)
        answer = done.stdout.decode("utf-8", errors="replace").strip()
        if done.returncode != 0 or answer != _PROBE_EXPECTED:
            said = done.stderr.decode("utf-8", errors="replace").strip() or answer
            raise SandboxUnavailable(
                f"bubblewrap ({self.host.bwrap}) cannot run {self.host.python} confined here"
                f" (exit {done.returncode}): {said[-600:] or 'no output'}"
            )

    def _new_scratch(self, script: str) -> Path:
        # As root the script runs as nobody, which must own its scratch directory.
        owner = (SANDBOX_UID, SANDBOX_GID) if self.host.privileged else None
        try:
            return new_scratch(self.scratch_root, SCRIPT_NAME, script, owner)
        except OSError as exc:  # a full disk, a removed scratch root: no run, no crash
            raise SandboxUnavailable(f"cannot create a scratch directory: {exc}") from None

    def _argv(self, scratch: Path, *, status_fd: int, info_fd: int) -> list[str]:
        prelude = [self.host.python, "-I", "-S", "-c", PRELUDE_SOURCE]
        prelude += self.limits.prelude_args(
            status_fd=status_fd,
            uid=SANDBOX_UID,
            gid=SANDBOX_GID,
            workdir=WORKDIR,
            script=f"{WORKDIR}/{SCRIPT_NAME}",
        )
        return command(self.host, scratch, info_fd=info_fd, prelude=prelude)

    async def _execute(self, run: RunningScript, scratch: Path) -> ActionResult:
        status_r, status_w = os.pipe()
        info_r, info_w = os.pipe()
        started = time.monotonic()
        try:
            try:
                proc = await asyncio.create_subprocess_exec(
                    *self._argv(scratch, status_fd=status_w, info_fd=info_w),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    pass_fds=(status_w, info_w),
                    start_new_session=True,  # its own process group, killed as one
                    env=_BWRAP_ENV,
                )
            finally:
                os.close(status_w)
                os.close(info_w)
            run.proc = proc
            if self._closed:  # aclose came while it started
                run.kill(CLOSED)
            try:
                stdout, stderr = await self._supervise(run, proc)
            finally:
                # Killed, or cancelled: wait until nothing is left. (Closing the info pipe
                # before bwrap has written to it would leave bwrap hanging: the pipes are
                # closed only once bwrap is dead.)
                if run.reason is not None:
                    await wait_gone(init_pid(read_ready(info_r)))
            duration_ms = round((time.monotonic() - started) * 1000)
            end = ScriptEnd.parse(read_ready(status_r))
        finally:
            os.close(status_r)
            os.close(info_r)
        return self._result(run, end, proc.returncode, stdout, stderr, duration_ms)

    async def _supervise(
        self, run: RunningScript, proc: asyncio.subprocess.Process
    ) -> tuple[CappedOutput, CappedOutput]:
        """Read both streams while waiting for the wall clock or the end."""
        limit = self.config.max_output_chars
        outputs = (CappedOutput(limit), CappedOutput(limit))
        readers: list[asyncio.Task[None]] = []
        try:
            for stream, sink in zip((proc.stdout, proc.stderr), outputs, strict=True):
                if stream is not None:
                    reader = pump(stream, sink, output_ceiling(limit), run)
                    readers.append(asyncio.create_task(reader))
            try:
                await asyncio.wait_for(proc.wait(), self.config.wall_timeout.total_seconds())
            except TimeoutError:
                run.kill(WALL_TIMEOUT)
                await proc.wait()
            if readers:
                await asyncio.wait(readers, timeout=_DRAIN_SECONDS)
        finally:
            if proc.returncode is None:  # cancelled (or failed): leave nothing running
                run.kill(CANCELLED)
                await proc.wait()
            for reader_task in readers:
                reader_task.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
        return outputs

    def _result(
        self,
        run: RunningScript,
        end: ScriptEnd | None,
        returncode: int | None,
        stdout: CappedOutput,
        stderr: CappedOutput,
        duration_ms: int,
    ) -> ActionResult:
        out, err = stdout.text(), stderr.text()
        if run.reason is not None:
            return ActionResult(None, out, err, duration_ms, True, run.reason)
        if end is None:
            # No report: bwrap could not set up (its message is on stderr), or the
            # prelude died (a script may kill its parent). bwrap's status is all there is.
            code = -1 if returncode is None else returncode
            number = -code if code < 0 else code - 128 if code > 128 else None
            if number is not None and 0 < number < signal.NSIG:
                return ActionResult(None, out, err, duration_ms, True, f"signal:{number}")
            return ActionResult(code, out, err, duration_ms, False)
        if end.signal is not None:
            return ActionResult(None, out, err, duration_ms, True, end.reason(self.limits))
        died_of_memory = end.code != 0 and stderr.last_line().startswith("MemoryError")
        reason = MEMORY_LIMIT if died_of_memory else None
        return ActionResult(end.code, out, err, duration_ms, False, reason)


def build_sandbox(config: SandboxConfig, scratch_root: Path) -> ScriptRunner:
    """The sandbox, checked: bwrap on PATH, the interpreter present, the scratch root
    usable, and a probe script run confined. Blocks for the probe (well under a second);
    call it at start-up. SandboxUnavailable says what is missing; there is no fallback."""
    host = find_host(config.python)
    prepare_root(scratch_root)
    sandbox = BwrapSandbox(config, scratch_root, host)
    sandbox.probe()
    log.info(
        "sandbox ready",
        extra={"bwrap": host.bwrap, "python": host.python, "privileged": host.privileged},
    )
    return sandbox
