"""The first code that runs inside the sandbox, before the script.

bubblewrap starts `python -I -S -c <the source of this file> ARGS` as the sandbox's
command; nothing of the gateway is importable there, so this file uses the standard
library only (and runs on Python 3.9 or later: the sandbox's interpreter need not be the
gateway's). It

1. closes every descriptor but stdio and the status pipe (bwrap passes its own on);
2. drops to the sandbox uid and gid when it starts as root (a gateway running as root
   runs bwrap without a user namespace, see bwrap.py), and refuses to go on as root;
3. lowers its priority and offers itself to the OOM killer first, so a hostile script
   competes with the gateway as little as possible;
4. forks: the child sets the resource limits and execs the interpreter on the script,
   so the limits bind the script and its descendants, not bwrap (which needs address
   space and descriptors of its own);
5. waits, and writes `<code> <cpu seconds>` to the status pipe, `code` being the exit
   status or minus the signal. Through bwrap alone a script killed by SIGKILL and one
   that exited with 137 look the same.

ARGS: status_fd uid gid workdir script cpu_soft cpu_hard memory_bytes processes
file_bytes open_files
"""

from __future__ import annotations

import contextlib
import os
import resource
import sys

#: The prelude would not start the script (still root, bad arguments).
REFUSED = 126
#: The interpreter could not be executed on the script.
CANNOT_EXEC = 127
#: Scripts run this much nicer than the gateway.
NICENESS = 10


def close_other_descriptors(keep: int) -> None:
    """Close every descriptor but 0, 1, 2 and `keep`."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd != keep:
            # OSError: the descriptor listdir itself used, closed already.
            with contextlib.suppress(OSError):
                os.close(fd)


def drop_privileges(uid: int, gid: int) -> None:
    """Become uid:gid with no supplementary groups when started as root; in a user
    namespace bwrap has done it already. Either way, never leave as root."""
    if os.getuid() == 0:
        os.setgroups([])
        os.setgid(gid)
        os.setuid(uid)  # from root to a non-zero uid: every capability is dropped too
    if 0 in os.getresuid() or 0 in os.getresgid():
        raise PermissionError("the sandbox still runs as root")


def lower_priority() -> None:
    """Both only ever make this process weaker, which needs no privilege."""
    with contextlib.suppress(OSError):
        os.nice(NICENESS)
    with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as adj:
        adj.write("1000")


def start_script(script: str, limits: list[tuple[int, int, int]]) -> None:
    """In the forked child: apply the limits, become the interpreter running `script`."""
    try:
        for which, soft, hard in limits:
            resource.setrlimit(which, (soft, hard))
        os.execv(sys.executable, [sys.executable, script])
    except BaseException as exc:
        os.write(2, f"sandbox: cannot start the script: {exc}\n".encode())
    os._exit(CANNOT_EXEC)


def main(argv: list[str]) -> int:
    try:
        status_fd, uid, gid = (int(value) for value in argv[0:3])
        workdir, script = argv[3], argv[4]
        cpu_soft, cpu_hard, memory, processes, file_bytes, open_files = (
            int(value) for value in argv[5:11]
        )
    except (ValueError, IndexError):
        os.write(2, b"sandbox: bad prelude arguments\n")
        return REFUSED
    close_other_descriptors(status_fd)
    try:
        drop_privileges(uid, gid)
        os.chdir(workdir)  # here, not by bwrap: as root it may not enter nobody's 0700
        os.environ["PWD"] = workdir
    except OSError as exc:
        os.write(2, f"sandbox: {exc}\n".encode())
        return REFUSED
    lower_priority()
    limits = [
        (resource.RLIMIT_CPU, cpu_soft, cpu_hard),
        (resource.RLIMIT_AS, memory, memory),
        (resource.RLIMIT_NPROC, processes, processes),
        (resource.RLIMIT_FSIZE, file_bytes, file_bytes),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),  # a core file would land in the scratch directory
    ]
    pid = os.fork()
    if pid == 0:
        os.close(status_fd)
        start_script(script, limits)
    _, status, usage = os.wait4(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    # OSError: the gateway stopped listening; bwrap's exit status still tells it something.
    with contextlib.suppress(OSError):
        os.write(status_fd, f"{code} {usage.ru_utime + usage.ru_stime:.3f}\n".encode())
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
