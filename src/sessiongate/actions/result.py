"""What running a script gives back, and the port the gateway runs scripts through."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

# Why the gateway killed a script (`ActionResult.reason`); limits.py names the signals.
WALL_TIMEOUT = "wall_timeout"
OUTPUT_LIMIT = "output_limit"
CLOSED = "closed"
CANCELLED = "cancelled"
#: Not a kill: the script exited, of a MemoryError (RLIMIT_AS).
MEMORY_LIMIT = "memory_limit"


@dataclass(frozen=True, slots=True)
class ActionResult:
    exit_code: int | None  # None when killed by a signal
    stdout: str  # at most max_output_chars, a cut marked at the end
    stderr: str
    duration_ms: int
    #: The script did not end by itself: the gateway killed it (`wall_timeout`,
    #: `output_limit`, `closed`, `cancelled`) or a signal did (`cpu_limit`,
    #: `file_size_limit`, `signal:<n>`).
    killed: bool
    #: Why it was killed, or `memory_limit` for a script that died of a MemoryError.
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "exit_code": self.exit_code,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "duration_ms": self.duration_ms,
            "killed": self.killed,
            "reason": self.reason,
        }


class ScriptRunner(Protocol):
    name: str

    async def run(self, script: str) -> ActionResult:
        """Run one script to its end; SandboxBusy past `max_concurrent`."""
        ...

    async def aclose(self) -> None:
        """Kill anything still running; later runs raise SandboxUnavailable."""
        ...
