"""The resource limits of one script, and what the prelude reports about how it ended.

The limits come from `[actions]` (`SandboxConfig`) and are applied inside the sandbox by
the prelude (prelude.py), on the script only. What each becomes:

- `cpu_seconds`: RLIMIT_CPU soft = cpu_seconds (SIGXCPU), hard one second later (SIGKILL,
  for a script that catches SIGXCPU). Per process: a script's children each get as much.
- `memory_mb`: RLIMIT_AS, per process. Python raises MemoryError past it.
- `max_processes`: RLIMIT_NPROC. The kernel counts every process and thread of the
  sandbox's uid, so the sandbox's own helpers that run as that uid are added: with a
  root gateway the prelude (bwrap's init runs as root and is not counted); in a user
  namespace bwrap's init as well. The script itself counts as one of `max_processes`.
- `max_file_mb`: RLIMIT_FSIZE. Python ignores SIGXFSZ, so a write past it fails (EFBIG).
- `max_open_files`: RLIMIT_NOFILE.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from pathlib import Path

from sessiongate.config.routing import SandboxConfig

MIB = 1024 * 1024
#: The source of the prelude, run with `python -I -S -c`.
PRELUDE_SOURCE = (Path(__file__).parent / "prelude.py").read_text(encoding="utf-8")


@dataclass(frozen=True, slots=True)
class ScriptLimits:
    cpu_seconds: int
    memory_bytes: int
    processes: int
    file_bytes: int
    open_files: int

    @classmethod
    def from_config(cls, config: SandboxConfig, *, helper_processes: int) -> ScriptLimits:
        """`helper_processes`: the sandbox's own processes counted under the script's uid."""
        return cls(
            cpu_seconds=config.cpu_seconds,
            memory_bytes=config.memory_mb * MIB,
            processes=config.max_processes + helper_processes,
            file_bytes=config.max_file_mb * MIB,
            open_files=config.max_open_files,
        )

    def prelude_args(
        self, *, status_fd: int, uid: int, gid: int, workdir: str, script: str
    ) -> list[str]:
        """The prelude's arguments after `-c SOURCE` (see prelude.py for the order)."""
        values: list[int | str] = [
            status_fd,
            uid,
            gid,
            workdir,
            script,
            self.cpu_seconds,
            self.cpu_seconds + 1,
            self.memory_bytes,
            self.processes,
            self.file_bytes,
            self.open_files,
        ]
        return [str(value) for value in values]


@dataclass(frozen=True, slots=True)
class ScriptEnd:
    """How the script process ended, as the prelude saw it."""

    #: The exit status (>= 0) or minus the signal that ended it.
    code: int
    #: CPU seconds (user + system) of the script and the children it waited for.
    cpu_seconds: float

    @property
    def signal(self) -> int | None:
        return -self.code if self.code < 0 else None

    @classmethod
    def parse(cls, report: bytes) -> ScriptEnd | None:
        """The prelude's `<code> <cpu seconds>` line; None when there is none (the prelude
        never got that far, or was killed with everything else)."""
        try:
            code, cpu = report.decode("ascii").split()
            return cls(int(code), float(cpu))
        except ValueError:
            return None

    def reason(self, limits: ScriptLimits) -> str | None:
        """Which limit ended the script, when a signal did."""
        number = self.signal
        if number is None:
            return None
        if number == signal.SIGXCPU or (
            number == signal.SIGKILL and self.cpu_seconds >= limits.cpu_seconds
        ):
            return "cpu_limit"
        if number == signal.SIGXFSZ:
            return "file_size_limit"
        return f"signal:{number}"
