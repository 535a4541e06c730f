"""One running sandbox, seen from the gateway: killing it as a whole, reading its output
without blocking the event loop, and knowing when nothing of it is left.

bwrap runs in a process group of its own (`start_new_session`); the sandbox's init (bwrap's
child, pid 1 of the new pid namespace) is in that group too, while the script is not
(`--new-session` gives it a session of its own). Killing the group kills bwrap and the
init; the kernel then kills every process left in the pid namespace, and the init exits
only once they are all gone. bwrap's `--info-fd` tells the init's host pid, which is how
the gateway waits for that.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from dataclasses import dataclass, field

from sessiongate.actions.output import CappedOutput
from sessiongate.actions.result import OUTPUT_LIMIT

log = logging.getLogger("sessiongate.actions")

_CHUNK = 64 * 1024
#: Only bounds a surprise: the init of a SIGKILLed sandbox exits at once.
GONE_SECONDS = 5.0


def output_ceiling(max_output_chars: int) -> int:
    """Bytes on one stream past which the script is killed (`output_limit`): well past
    what is kept, so that a chatty script still finishes, yet bounded, so that a `while
    True: print()` does not keep the gateway reading."""
    return 4 * max_output_chars + 1024 * 1024


@dataclass(eq=False)
class RunningScript:
    proc: asyncio.subprocess.Process | None = None
    #: Why the gateway killed it; None while it has not.
    reason: str | None = None
    finished: asyncio.Event = field(default_factory=asyncio.Event)

    def kill(self, reason: str) -> None:
        """SIGKILL bwrap's process group. Only while bwrap is unreaped, so that the group
        id cannot be anyone else's yet; a sandbox that has ended is not killed late."""
        proc = self.proc
        if proc is None or proc.returncode is not None:
            return
        if self.reason is None:
            self.reason = reason
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)


async def pump(
    stream: asyncio.StreamReader, sink: CappedOutput, ceiling: int, script: RunningScript
) -> None:
    """Read `stream` to its end into `sink`; kill the script once past `ceiling` bytes, and
    go on reading (and discarding) until the pipe closes."""
    while chunk := await stream.read(_CHUNK):
        sink.feed(chunk)
        if sink.total_bytes > ceiling:
            script.kill(OUTPUT_LIMIT)


def read_ready(fd: int) -> bytes:
    """What a pipe holds now, without waiting."""
    os.set_blocking(fd, False)
    data = b""
    with contextlib.suppress(BlockingIOError):
        while chunk := os.read(fd, 4096):
            data += chunk
    return data


def init_pid(info: bytes) -> int | None:
    """The host pid of the sandbox's init, from bwrap's `--info-fd` JSON."""
    try:
        pid = json.loads(info)["child-pid"]
    except (ValueError, KeyError, TypeError):
        return None
    return pid if isinstance(pid, int) and pid > 0 else None


async def wait_gone(pid: int | None) -> None:
    """Wait until the sandbox's init has exited: after a kill, nothing of the script is
    left when the run returns."""
    if pid is None:
        return
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return  # gone already
    except OSError as exc:  # no pidfds (old kernel, seccomp): the kill stands regardless
        log.warning("cannot wait for the sandbox init", extra={"pid": pid, "error": str(exc)})
        return
    loop = asyncio.get_running_loop()
    gone: asyncio.Future[None] = loop.create_future()

    def readable() -> None:
        if not gone.done():
            gone.set_result(None)

    loop.add_reader(pidfd, readable)
    try:
        await asyncio.wait_for(gone, GONE_SECONDS)
    except TimeoutError:
        log.warning("sandbox init still running after SIGKILL", extra={"pid": pid})
    finally:
        loop.remove_reader(pidfd)
        os.close(pidfd)
