"""The load loop of agent_turns.py, shared by every stack: sessions doing turns back to
back, all at once, each turn timed and checked; and a precise CPU clock of any process.

A stack is reached through a `TurnFn`: `await turn(key, content)` runs one whole turn
(both model calls and both tools, or a plan) and returns the answer text. The gateway's is
an HTTP request (agent_client.py); the peers' are library calls in their own process
(agent_peers.py). A turn is good when it returned and, for tool turns, its answer holds
the tool results the stub echoes back (agent_stub.EXPECTED).
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from support.agent_stub import EXPECTED, NO_TOOLS
from support.common import percentile

TurnFn = Callable[[str, str], Awaitable[str]]


def process_cpu_clock(pid: int) -> float:
    """CPU seconds (user + system, all threads) of process `pid`, nanosecond resolution:
    Linux's per-process CPU-time clock, `clockid = (~pid << 3) | 2` (what
    `clock_getcpuclockid(3)` returns). /proc/<pid>/stat counts in 10 ms ticks, too coarse
    to time one turn."""
    return time.clock_gettime(((~pid) << 3) | 2)


def stub_requests(stub_url: str) -> float:
    """How many completions the stub has answered so far (its `/_stats`)."""
    import urllib.request

    with urllib.request.urlopen(f"{stub_url}/_stats", timeout=10) as response:
        return float(json.load(response)["requests"])


def turn_content(key: str, turn: int, *, tools: bool = True) -> str:
    text = f"turn {turn} on {key}: look up alpha and add 1200 and 34, then tell me both."
    return text if tools else f"{NO_TOOLS} turn {turn} on {key}: just say something short."


@dataclass
class Phase:
    """One stack's closed loop: `sessions` x `turns` timed turns."""

    stack: str
    sessions: int
    turns: int
    wall_s: float = math.nan
    latencies_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    #: CPU seconds over the timed turns, by process ("server", "client", "stub", "peer"),
    #: and "model_calls": the completions the stub answered meanwhile.
    cpu_s: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> int:
        return len(self.latencies_ms)

    @property
    def turns_per_s(self) -> float:
        return self.ok / self.wall_s if self.wall_s > 0 else math.nan

    def cpu_ms_per_turn(self, process: str) -> float:
        value = self.cpu_s.get(process, math.nan)
        return value * 1000 / self.ok if self.ok else math.nan

    @property
    def model_calls_per_turn(self) -> float:
        calls = self.cpu_s.get("model_calls", math.nan)
        return calls / self.ok if self.ok else math.nan

    def p(self, q: float) -> float:
        return percentile(self.latencies_ms, q)

    def to_dict(self) -> dict[str, Any]:
        return {
            "stack": self.stack,
            "sessions": self.sessions,
            "turns": self.turns,
            "ok": self.ok,
            "wall_s": self.wall_s,
            "turns_per_s": self.turns_per_s,
            "latency_ms": {"p50": self.p(0.5), "p95": self.p(0.95), "p99": self.p(0.99)},
            "cpu_s": self.cpu_s,
            "failures": self.failures[:20],
            "failed": len(self.failures),
        }


async def checked_turn(turn: TurnFn, key: str, index: int, *, tools: bool) -> float:
    """One turn; its wall time in ms. Raises when it failed or its answer lacks the
    tool results."""
    started = time.perf_counter()
    answer = await turn(key, turn_content(key, index, tools=tools))
    elapsed = (time.perf_counter() - started) * 1000
    if tools:
        missing = [e for e in EXPECTED if e not in answer]
        if missing:
            raise RuntimeError(f"answer lacks {missing}: {answer[:120]!r}")
    elif not answer:
        raise RuntimeError("empty answer")
    return elapsed


async def closed_loop(
    turn: TurnFn,
    phase: Phase,
    label: str,
    cpu: Callable[[], dict[str, float]],
    *,
    tools: bool = True,
    warmup: int = 1,
    timeout_s: float = 600.0,
) -> Phase:
    """`phase.sessions` sessions on fresh keys `<label>-sNNN`, all at once, each doing
    `warmup` untimed turns (all sessions finish them before the clock starts) and then
    `phase.turns` timed turns back to back."""
    keys = [f"{label}-s{i:03d}" for i in range(phase.sessions)]

    async def warm(key: str) -> None:
        for index in range(warmup):
            try:
                await checked_turn(turn, key, index, tools=tools)
            except Exception as exc:  # counted, never fatal
                phase.failures.append(f"warm-up {key}: {type(exc).__name__}: {exc}")

    async def session(key: str) -> None:
        for index in range(warmup, warmup + phase.turns):
            try:
                phase.latencies_ms.append(await checked_turn(turn, key, index, tools=tools))
            except Exception as exc:  # counted, never fatal
                phase.failures.append(f"{key} turn {index}: {type(exc).__name__}: {exc}")

    await asyncio.wait_for(asyncio.gather(*(warm(k) for k in keys)), timeout_s)
    before = cpu()
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(session(k) for k in keys)), timeout_s)
    phase.wall_s = time.perf_counter() - started
    after = cpu()
    phase.cpu_s = {name: after[name] - before[name] for name in after}
    return phase
