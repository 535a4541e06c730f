"""The load generators of gateway_load.py (they run in the orchestrating process).

Every session has its own `httpx.AsyncClient` (one keep-alive connection, like independent
users; a single shared pool spends twice the CPU on httpcore's pool bookkeeping at 50
streams). A turn reads the raw response bytes and only counts SSE markers, so the client's
own cost is small and the same for every stack. Two ways to drive a phase:

* `run_closed_loop`: `sessions` coroutines, each doing its turns back to back; all start
  together (with equal reply lengths they stay in lockstep) unless `stagger_s` spreads
  their first turns.
* `run_open_loop`: turns arrive as a Poisson process at a fixed rate, whatever the stack's
  speed; each arrival takes the session that has been idle longest out of `sessions`. Its
  TTFT counts from the scheduled arrival, so time spent waiting for a free session or for
  a late client is in it (no coordinated omission).
"""

from __future__ import annotations

import asyncio
import json
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from support.stub import STUB_MODEL

CONTEXT_WINDOW = 50  # sessiongate's default memory_window: what a stateless client resends

# What the client looks for in the response bytes.
OPENAI_TOKEN = b'"content":"'  # only token chunks carry a content string (stub, LiteLLM)
OPENAI_END = b"data: [DONE]"
OPENAI_ERROR = b'data: {"error"'
SSE_TOKEN = b"event: token\n"
SSE_END = b"event: end\n"
SSE_ERROR = b"event: error\n"

CpuSnapshot = Callable[[], dict[str, float]]


@dataclass
class TurnSample:
    turn: int
    ttft_ms: float
    total_ms: float
    tokens: int
    ok: bool
    error: str = ""
    lag_ms: float = 0.0  # open loop: actual send - scheduled arrival
    at: float = math.nan  # perf_counter() when the turn started (or was scheduled)


@dataclass
class PhaseResult:
    target: str
    mode: str
    sessions: int
    turns: int
    wall_s: float
    samples: list[TurnSample]
    cpu_s: dict[str, float]
    offered_per_s: float = math.nan  # open loop: the arrival rate asked for

    @property
    def ok_samples(self) -> list[TurnSample]:
        return [s for s in self.samples if s.ok]

    @property
    def errors(self) -> int:
        return len(self.samples) - len(self.ok_samples)

    @property
    def turns_per_s(self) -> float:
        return len(self.ok_samples) / self.wall_s if self.wall_s > 0 else math.nan


@dataclass
class Target:
    """How one stack is asked for a turn, and what marks a token, the end and an error."""

    name: str
    url: str
    request: Callable[[str, int], tuple[str, bytes]]  # (session key, turn) -> (path, body)
    headers: dict[str, str]
    token_mark: bytes
    end_mark: bytes
    error_mark: bytes | None
    after_turn: Callable[[str], None] = field(default=lambda key: None)


def turn_text(key: str, turn: int) -> str:
    return f"turn {turn} on {key}: tell me something short about topic number {turn * 7 % 13}."


def openai_target(name: str, url: str, reply: str, api_key: str | None = None) -> Target:
    """A stateless OpenAI-compatible endpoint (the stub itself, or the LiteLLM proxy): the
    client keeps each session's history and resends its last `CONTEXT_WINDOW` messages, the
    same messages sessiongate sends upstream for that turn."""
    history: dict[str, list[dict[str, str]]] = {}

    def request(key: str, turn: int) -> tuple[str, bytes]:
        messages = history.setdefault(key, [])
        messages.append({"role": "user", "content": turn_text(key, turn)})
        body = {
            "model": STUB_MODEL,
            "messages": messages[-CONTEXT_WINDOW:],
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        return "/v1/chat/completions", json.dumps(body).encode()

    def after_turn(key: str) -> None:
        history[key].append({"role": "assistant", "content": reply})

    headers = {"content-type": "application/json"}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    error = OPENAI_ERROR if api_key else None
    return Target(name, url, request, headers, OPENAI_TOKEN, OPENAI_END, error, after_turn)


def gateway_target(url: str, api_key: str, name: str = "sessiongate") -> Target:
    def request(key: str, turn: int) -> tuple[str, bytes]:
        body = {"content": turn_text(key, turn), "stream": True}
        return f"/v1/sessions/{key}/messages", json.dumps(body).encode()

    headers = {"content-type": "application/json", "authorization": f"Bearer {api_key}"}
    return Target(name, url, request, headers, SSE_TOKEN, SSE_END, SSE_ERROR)


def langgraph_target(url: str) -> Target:
    def request(key: str, turn: int) -> tuple[str, bytes]:
        return "/chat", json.dumps({"thread_id": key, "content": turn_text(key, turn)}).encode()

    headers = {"content-type": "application/json"}
    return Target("langgraph", url, request, headers, SSE_TOKEN, SSE_END, SSE_ERROR)


async def one_turn(
    client: Any, target: Target, key: str, turn: int, tokens: int, since: float | None = None
) -> TurnSample:
    """One streamed turn. TTFT and total count from `since` (a perf_counter value) when
    given, else from the moment the request is sent."""
    path, body = target.request(key, turn)
    marks = (target.token_mark, target.end_mark, target.error_mark or b"")
    keep = max(len(m) for m in marks) - 1
    seen = 0
    first = math.nan
    ended = failed = False
    tail = b""
    sent = time.perf_counter()
    started = sent if since is None else since
    lag = (sent - started) * 1000
    try:
        async with client.stream(
            "POST", target.url + path, content=body, headers=target.headers
        ) as response:
            if response.status_code != 200:
                detail = (await response.aread())[:200].decode(errors="replace")
                error = f"HTTP {response.status_code}: {detail}"
                return TurnSample(turn, math.nan, math.nan, 0, False, error, lag, started)
            async for chunk in response.aiter_raw():
                buf = tail + chunk
                found = buf.count(target.token_mark) - tail.count(target.token_mark)
                if found:
                    if not seen:
                        first = (time.perf_counter() - started) * 1000
                    seen += found
                ended = ended or target.end_mark in buf
                failed = failed or (target.error_mark is not None and target.error_mark in buf)
                tail = buf[-keep:]
    except Exception as exc:  # counted as a failed turn, never hangs the run
        error = f"{type(exc).__name__}: {exc}"
        return TurnSample(turn, math.nan, math.nan, seen, False, error, lag, started)
    total = (time.perf_counter() - started) * 1000
    ok = ended and not failed and seen == tokens
    error = "" if ok else f"ended={ended} error_event={failed} tokens={seen}/{tokens}"
    if ok:
        target.after_turn(key)
    return TurnSample(turn, first, total, seen, ok, error, lag, started)


async def run_closed_loop(
    clients: Sequence[Any],
    target: Target,
    *,
    mode: str,
    label: str,
    sessions: int,
    turns: int,
    tokens: int,
    cpu: CpuSnapshot,
    phase_timeout: float,
    stagger_s: float = 0.0,
) -> PhaseResult:
    samples: list[TurnSample] = []

    async def session(index: int) -> None:
        key = f"{label}-s{index:03d}"
        if stagger_s:
            await asyncio.sleep(index * stagger_s / sessions)
        for turn in range(turns):
            samples.append(await one_turn(clients[index], target, key, turn, tokens))

    before = cpu()
    started = time.perf_counter()
    await asyncio.wait_for(asyncio.gather(*(session(i) for i in range(sessions))), phase_timeout)
    wall = time.perf_counter() - started
    after = cpu()
    used = {name: after[name] - before[name] for name in after}
    return PhaseResult(target.name, mode, sessions, turns, wall, samples, used)


def poisson_arrivals(rate: float, duration_s: float, seed: int) -> list[float]:
    """Arrival offsets (seconds from the phase start) of a Poisson process: exponential
    gaps with mean 1/rate, up to `duration_s`. The same seed gives the same schedule."""
    rng = random.Random(seed)
    arrivals: list[float] = []
    at = rng.expovariate(rate)
    while at < duration_s:
        arrivals.append(at)
        at += rng.expovariate(rate)
    return arrivals


async def run_open_loop(
    clients: Sequence[Any],
    target: Target,
    *,
    label: str,
    sessions: int,
    rate: float,
    duration_s: float,
    seed: int,
    tokens: int,
    cpu: CpuSnapshot,
    phase_timeout: float,
) -> PhaseResult:
    arrivals = poisson_arrivals(rate, duration_s, seed)
    idle: asyncio.Queue[int] = asyncio.Queue()
    for index in range(sessions):
        idle.put_nowait(index)
    done_turns = [0] * sessions
    samples: list[TurnSample] = []

    async def turn(index: int, scheduled: float) -> None:
        key = f"{label}-s{index:03d}"
        try:
            sample = await one_turn(
                clients[index], target, key, done_turns[index], tokens, since=scheduled
            )
            samples.append(sample)
            done_turns[index] += 1
        finally:
            idle.put_nowait(index)

    async def dispatch(started: float) -> None:
        tasks: list[asyncio.Task[None]] = []
        for offset in arrivals:
            delay = started + offset - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            index = await idle.get()  # waits only when every session is busy
            tasks.append(asyncio.create_task(turn(index, started + offset)))
        await asyncio.gather(*tasks)

    before = cpu()
    started = time.perf_counter()
    await asyncio.wait_for(dispatch(started), phase_timeout)
    wall = time.perf_counter() - started
    after = cpu()
    used = {name: after[name] - before[name] for name in after}
    result = PhaseResult(target.name, "open", sessions, len(arrivals), wall, samples, used)
    result.offered_per_s = rate
    return result
