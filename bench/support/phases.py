"""The measurement plan of gateway_load.py: which phases run, in which order, on which stub
mode. Every phase is run for every target round-robin (so drift on a shared machine hits
all alike) and on fresh session keys (so every target sees the same history lengths).
Before each measured phase one unrecorded turn per session re-warms that target's
keep-alive connections (httpx drops idle ones after 5 s, and the other targets' phases take
longer than that): the figures are steady-state ones.

1. warm-up, instant stub, c=50 (not recorded);
2. `single`: one session alone on the paced stub: TTFT without any queueing;
3. `single-instant`: one session alone on the instant stub: turns/s of one user;
4. `capacity`: 50 sessions back to back (closed loop) on the instant stub: turns/s, CPU;
5. `capacity-split`: the same closed loop on the split stub (first token after 10 ms, the
   rest 10 ms later), whose turns cost a stack more CPU than instant ones (the first token
   is read and written on its own): the capacity the open loop is a fraction of;
6. `open`: Poisson arrivals over 50 sessions at `open_load` x the capacity of phase 5 (the
   stack's own, or sessiongate's with `open_capacity`), split stub, each stack right after
   the direct path at the same rate and on the same arrival schedule;
7. `lockstep`: 50 sessions starting together on the paced stub: all 50 requests of a turn
   arrive within a millisecond, every turn (the burst the previous targets were judged on).
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import math
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from support.client import (
    PhaseResult,
    Target,
    gateway_target,
    langgraph_target,
    openai_target,
    run_closed_loop,
    run_open_loop,
)
from support.common import fmt, percentile
from support.stacks import Stacks
from support.stub import stub_tokens

Results = dict[str, dict[str, list[PhaseResult]]]  # target -> phase -> one result per round


@dataclass
class Plan:
    sessions: int = 50
    tokens: int = 20
    warmup_turns: int = 2
    single_turns: int = 40  # c=1, paced stub
    single_instant_turns: int = 200  # c=1, instant stub
    capacity_turns: int = 40  # per session, c=50, instant stub
    split_turns: int = 20  # per session, c=50, split stub (one round)
    lockstep_turns: int = 10  # per session, c=50, paced stub
    rounds: int = 3  # of the capacity and lockstep phases
    open_seconds: float = 10.0
    open_rounds: int = 2
    open_load: float = 0.5  # x capacity
    open_capacity: str = "own"  # whose capacity sets the open-loop rate: "own" or "sessiongate"
    seed: int = 20260324
    phase_timeout: float = 240.0


@contextlib.contextmanager
def client_gc_paused() -> Iterator[None]:
    """The client's cyclic GC would pause it for 10-30 ms now and then, and each pause would
    land in the TTFT of whatever turns were in flight. It is paused while the phases run and
    collects between them (`settle`). The servers keep their own GC, as in production."""
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


def open_rate(plan: Plan, capacity: dict[str, float], name: str) -> float:
    base = capacity[name] if plan.open_capacity == "own" else capacity["sessiongate"]
    return plan.open_load * base


def capacities(results: Results, phase: str = "capacity-split") -> dict[str, float]:
    """Closed-loop turns/s of every target in `phase`, over all its rounds."""
    out: dict[str, float] = {}
    for name, phases in results.items():
        done = sum(len(r.ok_samples) for r in phases.get(phase, []))
        wall = sum(r.wall_s for r in phases.get(phase, []))
        out[name] = done / wall if wall else math.nan
    return out


async def drive(plan: Plan, stacks: Stacks) -> Results:
    import httpx

    reply = "".join(stub_tokens(plan.tokens))
    stub = stacks.stub
    targets: list[Target] = [openai_target("direct", stub.url, reply)]
    for server in stacks.servers:
        if server.name.startswith("sessiongate"):
            targets.append(gateway_target(server.url, server.info["api_key"], server.name))
        elif server.name == "langgraph":
            targets.append(langgraph_target(server.url))
        elif server.name in ("floor", "floor-durable", "floor-fastapi"):
            targets.append(openai_target(server.name, server.url, reply))
        elif server.name == "litellm":
            targets.append(openai_target("litellm", server.url, reply, server.info["api_key"]))
    by_name = {t.name: t for t in targets}
    servers = stacks.by_name()

    def cpu_for(name: str) -> Any:
        def snapshot() -> dict[str, float]:
            values = {"stub": stub.cpu_seconds(), "client": time.process_time()}
            values["server"] = servers[name].cpu_seconds() if name in servers else math.nan
            return values

        return snapshot

    limits = httpx.Limits(max_connections=2, max_keepalive_connections=2)
    timeout = httpx.Timeout(60, connect=10)
    pools = {
        t.name: [httpx.AsyncClient(limits=limits, timeout=timeout) for _ in range(plan.sessions)]
        for t in targets
    }
    results: Results = {t.name: {} for t in targets}

    async with contextlib.AsyncExitStack() as stack:
        stack.enter_context(client_gc_paused())
        for pool in pools.values():
            for session_client in pool:
                await stack.enter_async_context(session_client)
        control = pools["direct"][0]

        async def set_mode(mode: str) -> None:
            response = await control.post(f"{stub.url}/_mode", json={"mode": mode})
            response.raise_for_status()

        async def closed(
            target: Target, phase: str, label: str, turns: int, sessions: int = plan.sessions
        ) -> PhaseResult:
            result = await run_closed_loop(
                pools[target.name],
                target,
                mode=phase,
                label=label,
                sessions=sessions,
                turns=turns,
                tokens=plan.tokens,
                cpu=cpu_for(target.name),
                phase_timeout=plan.phase_timeout,
            )
            report_phase(result, phase)
            return result

        async def rewarm(target: Target, label: str, sessions: int = plan.sessions) -> None:
            """One unrecorded turn per session (kept under "rewarm" for the turn count)."""
            await settle()
            result = await run_closed_loop(
                pools[target.name],
                target,
                mode="rewarm",
                label=label,
                sessions=sessions,
                turns=1,
                tokens=plan.tokens,
                cpu=cpu_for(target.name),
                phase_timeout=plan.phase_timeout,
            )
            results[target.name].setdefault("rewarm", []).append(result)

        async def settle() -> None:
            """Between phases: collect the client's garbage now, not during a phase."""
            gc.collect()
            await asyncio.sleep(0.2)

        def record(name: str, phase: str, result: PhaseResult) -> None:
            results[name].setdefault(phase, []).append(result)

        await set_mode("instant")
        for target in targets:
            await rewarm(target, f"warm-{target.name}")
            result = await closed(target, "warm-up", f"warm2-{target.name}", plan.warmup_turns)
            record(target.name, "warm-up", result)

        await set_mode("paced")
        for target in targets:
            await rewarm(target, f"rw-single-{target.name}", sessions=1)
            label = f"single-{target.name}"
            record(
                target.name, "single", await closed(target, "single", label, plan.single_turns, 1)
            )

        await set_mode("instant")
        for target in targets:
            await rewarm(target, f"rw-single-i-{target.name}", sessions=1)
            label = f"single-i-{target.name}"
            turns = plan.single_instant_turns
            record(target.name, "single-instant", await closed(target, "single-i", label, turns, 1))
        for r in range(plan.rounds):
            for target in targets:
                await rewarm(target, f"rw-cap{r}-{target.name}")
                label = f"cap-r{r}-{target.name}"
                result = await closed(target, "capacity", label, plan.capacity_turns)
                record(target.name, "capacity", result)

        await set_mode("split")
        for target in targets:
            await rewarm(target, f"rw-cap-split-{target.name}")
            label = f"cap-split-{target.name}"
            result = await closed(target, "capacity-split", label, plan.split_turns)
            record(target.name, "capacity-split", result)
        capacity = capacities(results)
        for r in range(plan.open_rounds):
            for target in targets[1:]:
                rate = open_rate(plan, capacity, target.name)
                if not rate > 0:
                    continue
                for measured in (by_name["direct"], target):
                    await rewarm(measured, f"rw-open{r}-{target.name}-{measured.name}")
                    result = await run_open_loop(
                        pools[measured.name],
                        measured,
                        label=f"open-r{r}-{target.name}-{measured.name}",
                        sessions=plan.sessions,
                        rate=rate,
                        duration_s=plan.open_seconds,
                        seed=plan.seed + r,
                        tokens=plan.tokens,
                        cpu=cpu_for(measured.name),
                        phase_timeout=plan.phase_timeout,
                    )
                    report_phase(result, f"open@{target.name}")
                    phase = "open" if measured is target else f"open@{target.name}"
                    record(measured.name, phase, result)

        await set_mode("paced")
        for r in range(plan.rounds):
            for target in targets:
                await rewarm(target, f"rw-lock{r}-{target.name}")
                label = f"lock-r{r}-{target.name}"
                record(
                    target.name,
                    "lockstep",
                    await closed(target, "lockstep", label, plan.lockstep_turns),
                )
    return results


def report_phase(result: PhaseResult, phase: str) -> None:
    """One progress line per measured phase."""
    ttfts = [s.ttft_ms for s in result.ok_samples]
    bad = [s.error for s in result.samples if not s.ok]
    offered = "" if math.isnan(result.offered_per_s) else f" (offered {result.offered_per_s:.1f}/s)"
    print(
        f"  {phase:<20} {result.target:<14} c={result.sessions:<3d} {len(result.ok_samples):5d} "
        f"turns in {result.wall_s:6.2f} s = {result.turns_per_s:7.1f}/s{offered}  TTFT p50 "
        f"{fmt(percentile(ttfts, 0.5))} p99 {fmt(percentile(ttfts, 0.99))} ms"
        + (f"  FAILED {len(bad)}: {bad[0]}" if bad else ""),
        flush=True,
    )
