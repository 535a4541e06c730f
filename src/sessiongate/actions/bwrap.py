"""bubblewrap: what the host must offer (checked at start-up) and the command line of one
sandboxed run.

Two ways to run it, chosen by who the gateway runs as:

- As root, bwrap runs privileged and creates no user namespace. Inside one, the script's
  real uid would be root's (bwrap maps the sandbox uid onto the caller's), and the kernel
  never applies RLIMIT_NPROC to real uid 0: a fork bomb would go unchecked. So the
  prelude starts as root with only CAP_SETUID and CAP_SETGID, drops to uid/gid 65534
  (nobody) for real, and the script runs as nobody: every capability gone, no_new_privs
  set by bwrap, every mount nosuid.
- As anyone else, bwrap runs unprivileged in a user namespace (`--unshare-user`, uid and
  gid 65534 inside, further user namespaces disabled where bwrap supports it). The
  script's real uid is the gateway's, which RLIMIT_NPROC does bind.

Either way the sandbox has its own network (loopback only), pid, IPC and UTS namespaces,
a fresh session (no controlling terminal: TIOCSTI has nothing to push into), dies with
the gateway, and sees only: /usr and the /bin, /lib… entries read-only, a few /etc files
the dynamic loader and the interpreter read, a fresh /proc and a minimal read-only /dev,
and the per-run scratch directory at /work (read-write, its cwd and HOME). The root of
its file system is an empty read-only tmpfs: nothing else of the host exists in there.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sessiongate.actions.errors import SandboxUnavailable

#: The uid and gid scripts run as (nobody/nogroup on Debian).
SANDBOX_UID = 65534
SANDBOX_GID = 65534
#: Where the scratch directory appears inside, and the script's name in it.
WORKDIR = "/work"
SCRIPT_NAME = "script.py"
#: The PATH inside; a bare `[actions] python` is looked up here, not on the gateway's PATH
#: (which may hold shims or virtual environments the sandbox cannot see).
SANDBOX_PATH = ("/usr/local/bin", "/usr/bin", "/bin")
#: Top-level entries mirrored read-only (or as the same symlink on merged-/usr systems).
SYSTEM_ENTRIES = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: The /etc files the dynamic loader and Python read; no passwd, no shadow, no ssl.
ETC_ENTRIES = (
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
)
#: The environment inside: nothing of the gateway's.
ENVIRONMENT = {
    "HOME": WORKDIR,
    "LANG": "C.UTF-8",
    "PYTHONDONTWRITEBYTECODE": "1",
    "PYTHONIOENCODING": "utf-8",
}


@dataclass(frozen=True, slots=True)
class Host:
    """What start-up found: bwrap, the interpreter, and how to run them."""

    bwrap: str
    #: The interpreter's real path: the same inside (its directory is mounted at its
    #: own path).
    python: str
    #: The interpreter's installation, mounted read-only, when it lies outside /usr.
    python_prefix: str | None
    #: The gateway runs as root: bwrap runs privileged, the prelude drops to nobody.
    privileged: bool
    #: This bwrap knows `--disable-userns` (0.8 and later).
    disable_userns: bool

    @property
    def helper_processes(self) -> int:
        """The sandbox's own processes that run as the script's uid (see limits.py)."""
        return 1 if self.privileged else 2


def find_host(python: str) -> Host:
    """Check what the sandbox needs; SandboxUnavailable naming what is missing."""
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        raise SandboxUnavailable(
            "bubblewrap (bwrap) is not on PATH: install the Debian package bubblewrap"
            " (scripts/sandbox.sh does)"
        )
    interpreter = _find_interpreter(python)
    prefix: str | None = None
    if not _under_system_dirs(interpreter):
        if interpreter.parent.name != "bin" or interpreter.parent.parent == Path("/"):
            raise SandboxUnavailable(
                f"the sandbox interpreter {interpreter} is outside /usr and not in an"
                " installation's bin/ directory: cannot tell what to mount for it"
            )
        prefix = str(interpreter.parent.parent)
    return Host(
        bwrap=bwrap,
        python=str(interpreter),
        python_prefix=prefix,
        privileged=os.geteuid() == 0,
        disable_userns="--disable-userns" in _help_text(bwrap),
    )


def _find_interpreter(python: str) -> Path:
    if os.sep in python:
        if not os.path.isabs(python):
            raise SandboxUnavailable(
                f"[actions] python = {python!r}: give a bare name or an absolute path"
            )
        candidates = [Path(python)]
    else:
        candidates = [Path(directory, python) for directory in SANDBOX_PATH]
    for candidate in candidates:
        real = candidate.resolve()
        if real.is_file() and os.access(real, os.X_OK):
            return real
    where = candidates[0] if len(candidates) == 1 else ":".join(SANDBOX_PATH)
    raise SandboxUnavailable(
        f"the sandbox interpreter {python!r} was not found ({where}): install it or set"
        " [actions] python"
    )


def _under_system_dirs(path: Path) -> bool:
    roots = [Path("/usr")]
    roots += [Path(entry) for entry in SYSTEM_ENTRIES if _is_real_dir(entry)]
    return any(path.is_relative_to(root) for root in roots)


def _is_real_dir(path: str) -> bool:
    return os.path.isdir(path) and not os.path.islink(path)


def _help_text(bwrap: str) -> str:
    try:
        done = subprocess.run([bwrap, "--help"], capture_output=True, text=True, timeout=10, env={})
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxUnavailable(f"bubblewrap ({bwrap}) does not run: {exc}") from None
    return done.stdout + done.stderr


def command(host: Host, scratch: Path, *, info_fd: int, prelude: list[str]) -> list[str]:
    """bwrap's argv for one run: `scratch` becomes /work, `prelude` is the command
    (interpreter, `-I -S -c SOURCE`, its arguments). Nothing here goes through a shell."""
    argv = [host.bwrap]
    if host.privileged:
        # Not --unshare-all: it would add a user namespace when it can (see above).
        argv += ["--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"]
        argv += ["--unshare-cgroup-try"]
        argv += ["--cap-drop", "ALL", "--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    else:
        argv += ["--unshare-all", "--unshare-net", "--unshare-user"]
        argv += ["--uid", str(SANDBOX_UID), "--gid", str(SANDBOX_GID)]
        argv += ["--disable-userns"] if host.disable_userns else []
        argv += ["--cap-drop", "ALL"]
    argv += ["--die-with-parent", "--new-session", "--hostname", "sandbox"]
    argv += ["--info-fd", str(info_fd)]
    argv += _file_system(host, scratch)
    argv += ["--clearenv"]
    path = ":".join(SANDBOX_PATH)
    if host.python_prefix is not None:
        path = f"{host.python_prefix}/bin:{path}"
    for name, value in {**ENVIRONMENT, "PATH": path}.items():
        argv += ["--setenv", name, value]
    return [*argv, "--", *prelude]


def _file_system(host: Host, scratch: Path) -> list[str]:
    argv = ["--ro-bind", "/usr", "/usr"]
    for entry in SYSTEM_ENTRIES:
        if os.path.islink(entry):
            argv += ["--symlink", os.readlink(entry), entry]
        elif os.path.isdir(entry):
            argv += ["--ro-bind", entry, entry]
    # bwrap makes missing parents 0700, which nobody could not enter.
    argv += ["--perms", "0755", "--dir", "/etc"]
    for entry in ETC_ENTRIES:
        argv += ["--ro-bind-try", entry, entry]
    if host.python_prefix is not None:
        for parent in reversed(Path(host.python_prefix).parents[:-1]):
            argv += ["--perms", "0755", "--dir", str(parent)]
        argv += ["--ro-bind", host.python_prefix, host.python_prefix]
    argv += ["--proc", "/proc", "--dev", "/dev"]
    argv += ["--bind", str(scratch), WORKDIR]
    # The root tmpfs and /dev's would be writable by the sandbox's owner otherwise (in a
    # user namespace, that is the script); --dev's /dev/shm goes read-only with /dev.
    argv += ["--remount-ro", "/dev", "--remount-ro", "/"]
    return argv
