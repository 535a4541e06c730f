"""What gateway_load.py prints: one summary per target, the table, the targets with their
verdicts, the JSON file and the last line.

"Added TTFT" is always a difference of quantiles measured by the same client in the same
phase: p50 (p99) of TTFT through a stack minus p50 (p99) of TTFT straight to the stub. For
c=1 and lockstep the direct path ran the same phase; for the open loop it ran the same
arrival schedule at the same rate, right before the stack.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from support.client import PhaseResult
from support.common import fmt, percentile, render_table
from support.phases import Plan, Results

TARGET_C1_ADDED_P50_MS = 2.0
TARGET_OPEN_ADDED_P99_MS = 10.0
TARGET_TURNS_PER_S = 500.0
TARGET_RATIO_VS_LANGGRAPH = 4.0
#: Issue 24's targets against the floor (support/stacks_floor.py), ratios in one run.
TARGET_CPU_VS_FLOOR = 2.0
TARGET_C1_VS_FLOOR = 1.5
NO_CELL = "\u2013"  # a table cell with nothing to show


def _ttfts(phases: Sequence[PhaseResult]) -> list[float]:
    return [s.ttft_ms for r in phases for s in r.ok_samples]


def _rate(phases: Sequence[PhaseResult]) -> float:
    done = sum(len(r.ok_samples) for r in phases)
    wall = sum(r.wall_s for r in phases)
    return done / wall if wall else math.nan


@dataclass
class Summary:
    target: str
    c1_ttft_p50_ms: float = math.nan
    c1_ttft_p99_ms: float = math.nan
    c1_turns_per_s: float = math.nan  # one session, instant stub
    capacity_turns_per_s: float = math.nan  # c=50 closed loop, instant stub
    cpu_ms_per_turn: dict[str, float] = field(default_factory=dict)  # capacity phase
    cpu_busy: dict[str, float] = field(default_factory=dict)  # cores, capacity phase
    split_turns_per_s: float = math.nan  # c=50 closed loop, split stub: sets the open loop
    open_offered_per_s: float = math.nan
    open_cpu_ms_per_turn: float = math.nan  # server
    open_cpu_busy: float = math.nan  # server, cores
    open_turns_per_s: float = math.nan
    open_ttft_p50_ms: float = math.nan
    open_ttft_p99_ms: float = math.nan
    open_direct_p50_ms: float = math.nan  # the direct path on the same schedule
    open_direct_p99_ms: float = math.nan
    open_lag_p99_ms: float = math.nan  # client: actual send - scheduled arrival
    open_direct_lag_p99_ms: float = math.nan
    open_samples: int = 0
    lock_ttft_p50_ms: float = math.nan
    lock_ttft_p99_ms: float = math.nan
    lock_turns_per_s: float = math.nan
    errors: int = 0
    # Added TTFT (through the stack - direct), filled in by `summarise_all`.
    added: dict[str, float] = field(default_factory=dict)


def summarise(name: str, phases: dict[str, list[PhaseResult]], direct: Results) -> Summary:
    s = Summary(name)
    single, cap = phases.get("single", []), phases.get("capacity", [])
    s.c1_ttft_p50_ms = percentile(_ttfts(single), 0.5)
    s.c1_ttft_p99_ms = percentile(_ttfts(single), 0.99)
    s.c1_turns_per_s = _rate(phases.get("single-instant", []))
    s.capacity_turns_per_s = _rate(cap)
    done = sum(len(r.ok_samples) for r in cap)
    wall = sum(r.wall_s for r in cap)
    cpu: dict[str, float] = {}
    for r in cap:
        for proc, seconds in r.cpu_s.items():
            cpu[proc] = cpu.get(proc, 0.0) + seconds
    s.cpu_ms_per_turn = {p: v * 1000 / done for p, v in cpu.items()} if done else {}
    s.cpu_busy = {p: v / wall for p, v in cpu.items()} if wall else {}
    s.split_turns_per_s = _rate(phases.get("capacity-split", []))
    opened = phases.get("open", [])
    if opened:
        used = sum(r.cpu_s.get("server", math.nan) for r in opened)
        s.open_cpu_ms_per_turn = used * 1000 / max(1, sum(len(r.ok_samples) for r in opened))
        s.open_cpu_busy = used / sum(r.wall_s for r in opened)
        s.open_offered_per_s = opened[0].offered_per_s
        s.open_turns_per_s = _rate(opened)
        s.open_ttft_p50_ms = percentile(_ttfts(opened), 0.5)
        s.open_ttft_p99_ms = percentile(_ttfts(opened), 0.99)
        s.open_lag_p99_ms = percentile([x.lag_ms for r in opened for x in r.samples], 0.99)
        s.open_samples = len(_ttfts(opened))
        reference = direct.get("direct", {}).get(f"open@{name}", [])
        s.open_direct_p50_ms = percentile(_ttfts(reference), 0.5)
        s.open_direct_p99_ms = percentile(_ttfts(reference), 0.99)
        s.open_direct_lag_p99_ms = percentile(
            [x.lag_ms for r in reference for x in r.samples], 0.99
        )
    lock = phases.get("lockstep", [])
    s.lock_ttft_p50_ms = percentile(_ttfts(lock), 0.5)
    s.lock_ttft_p99_ms = percentile(_ttfts(lock), 0.99)
    s.lock_turns_per_s = _rate(lock)
    s.errors = sum(r.errors for rs in phases.values() for r in rs)
    return s


def summarise_all(results: Results) -> tuple[Summary, list[Summary]]:
    direct = summarise("direct", results["direct"], results)
    stacks = [summarise(name, results[name], results) for name in results if name != "direct"]
    for s in stacks:
        s.added = {
            "c1_p50": s.c1_ttft_p50_ms - direct.c1_ttft_p50_ms,
            "c1_p99": s.c1_ttft_p99_ms - direct.c1_ttft_p99_ms,
            "open_p50": s.open_ttft_p50_ms - s.open_direct_p50_ms,
            "open_p99": s.open_ttft_p99_ms - s.open_direct_p99_ms,
            "lock_p50": s.lock_ttft_p50_ms - direct.lock_ttft_p50_ms,
            "lock_p99": s.lock_ttft_p99_ms - direct.lock_ttft_p99_ms,
        }
    return direct, stacks


def _pair(a: float, b: float) -> str:
    return f"{fmt(a)} / {fmt(b)}"


def table(direct: Summary, stacks: Sequence[Summary], plan: Plan) -> str:
    c = plan.sessions
    load = f"{plan.open_load:g} x {'own' if plan.open_capacity == 'own' else 'sessiongate'}"
    rows: list[list[str]] = []

    def row(label: str, value: Any, direct_cell: str | None = None) -> None:
        first = value(direct) if direct_cell is None else direct_cell
        rows.append([label, first, *(value(s) for s in stacks)])

    def cpu(s: Summary) -> str:
        return " / ".join(
            fmt(s.cpu_ms_per_turn.get(p, math.nan)) for p in ("server", "stub", "client")
        )

    row("TTFT p50 / p99, c=1 (ms)", lambda s: _pair(s.c1_ttft_p50_ms, s.c1_ttft_p99_ms))
    row(
        "**added TTFT p50 / p99, c=1 (ms)**",
        lambda s: _pair(s.added["c1_p50"], s.added["c1_p99"]),
        NO_CELL,
    )
    row("turns/s, c=1 (instant stub)", lambda s: fmt(s.c1_turns_per_s, 1))
    row(f"**turns/s, c={c} closed loop (instant stub)**", lambda s: fmt(s.capacity_turns_per_s, 1))
    row("CPU ms/turn server / stub / client", cpu)
    row("server CPU busy (cores)", lambda s: fmt(s.cpu_busy.get("server", math.nan)))
    row(f"turns/s, c={c} closed loop (split stub)", lambda s: fmt(s.split_turns_per_s, 1))
    row(
        f"open loop: arrivals/s ({load} split capacity)",
        lambda s: fmt(s.open_offered_per_s, 1),
        NO_CELL,
    )
    row("open loop: turns/s done", lambda s: fmt(s.open_turns_per_s, 1), NO_CELL)
    row(
        "open loop: direct TTFT p50 / p99, same schedule (ms)",
        lambda s: _pair(s.open_direct_p50_ms, s.open_direct_p99_ms),
        NO_CELL,
    )
    row(
        "open loop: TTFT p50 / p99 (ms)",
        lambda s: _pair(s.open_ttft_p50_ms, s.open_ttft_p99_ms),
        NO_CELL,
    )
    row(
        "**added TTFT p50 / p99, open loop (ms)**",
        lambda s: _pair(s.added["open_p50"], s.added["open_p99"]),
        NO_CELL,
    )
    row(
        "open loop: server CPU ms/turn, cores busy",
        lambda s: _pair(s.open_cpu_ms_per_turn, s.open_cpu_busy),
        NO_CELL,
    )
    row(
        "open loop: client send lag p99, direct / stack (ms)",
        lambda s: _pair(s.open_direct_lag_p99_ms, s.open_lag_p99_ms),
        NO_CELL,
    )
    row(
        f"TTFT p50 / p99, lockstep c={c} (ms)",
        lambda s: _pair(s.lock_ttft_p50_ms, s.lock_ttft_p99_ms),
    )
    row(
        f"added TTFT p50 / p99, lockstep c={c} (ms)",
        lambda s: _pair(s.added["lock_p50"], s.added["lock_p99"]),
        NO_CELL,
    )
    row(f"turns/s, lockstep c={c} (paced stub)", lambda s: fmt(s.lock_turns_per_s, 1))
    row("failed turns", lambda s: str(s.errors))
    headers = ["", "direct stub", *(s.target for s in stacks)]
    return render_table(headers, rows, right=set(range(1, len(headers))))


@dataclass
class Check:
    name: str
    passed: bool
    detail: str


def _ratio(a: float, b: float) -> float:
    return a / b if b and not math.isnan(b) else math.nan


def checks(stacks: Sequence[Summary]) -> list[Check]:
    by = {s.target: s for s in stacks}
    sg = by["sessiongate"]
    lg, ll = by.get("langgraph"), by.get("litellm")
    out = [
        Check(
            f"added TTFT at c=1, p50 <= {TARGET_C1_ADDED_P50_MS:g} ms",
            sg.added["c1_p50"] <= TARGET_C1_ADDED_P50_MS,
            f"{fmt(sg.added['c1_p50'])} ms",
        ),
        Check(
            f"added TTFT in the open loop, p99 <= {TARGET_OPEN_ADDED_P99_MS:g} ms",
            sg.added["open_p99"] <= TARGET_OPEN_ADDED_P99_MS,
            f"{fmt(sg.added['open_p99'])} ms",
        ),
    ]
    if ll is not None:
        phases = [
            ("c=1", "c1", sg.c1_turns_per_s, ll.c1_turns_per_s),
            ("closed loop c=50", None, sg.capacity_turns_per_s, ll.capacity_turns_per_s),
            ("open loop", "open", sg.open_turns_per_s, ll.open_turns_per_s),
            ("lockstep c=50", "lock", sg.lock_turns_per_s, ll.lock_turns_per_s),
        ]
        for label, key, sg_rate, ll_rate in phases:
            ok = sg_rate >= ll_rate
            detail = f"turns/s {fmt(sg_rate, 1)} vs {fmt(ll_rate, 1)}"
            if key:
                p50, p99 = (sg.added[f"{key}_{q}"] for q in ("p50", "p99"))
                l50, l99 = (ll.added[f"{key}_{q}"] for q in ("p50", "p99"))
                ok = ok and p50 <= l50 and p99 <= l99
                detail += (
                    f"; added TTFT p50 {fmt(p50)} vs {fmt(l50)}, p99 {fmt(p99)} vs {fmt(l99)} ms"
                )
            out.append(Check(f"no worse than LiteLLM, {label}", ok, detail))
    out.append(
        Check(
            f">= {TARGET_TURNS_PER_S:g} turns/s (closed loop c=50, instant stub)",
            sg.capacity_turns_per_s >= TARGET_TURNS_PER_S,
            f"{fmt(sg.capacity_turns_per_s, 1)} turns/s",
        )
    )
    if lg is not None:
        ratio = _ratio(sg.capacity_turns_per_s, lg.capacity_turns_per_s)
        out.append(
            Check(
                f">= {TARGET_RATIO_VS_LANGGRAPH:g}x the LangGraph stack's turns/s",
                ratio >= TARGET_RATIO_VS_LANGGRAPH,
                f"{fmt(ratio)}x ({fmt(sg.capacity_turns_per_s, 1)} vs "
                f"{fmt(lg.capacity_turns_per_s, 1)})",
            )
        )
    floor = by.get("floor")
    if floor is not None:
        cpu = _ratio(
            sg.cpu_ms_per_turn.get("server", math.nan),
            floor.cpu_ms_per_turn.get("server", math.nan),
        )
        out.append(
            Check(
                f"server CPU per turn <= {TARGET_CPU_VS_FLOOR:g}x the bare proxy's",
                cpu <= TARGET_CPU_VS_FLOOR,
                f"{fmt(cpu)}x ({fmt(sg.cpu_ms_per_turn.get('server', math.nan))} vs "
                f"{fmt(floor.cpu_ms_per_turn.get('server', math.nan))} ms)",
            )
        )
        # Not targets: how far a gateway that stores the turn, and one written with
        # FastAPI, stay from the floor; and sessiongate against each.
        for name, label in (("floor-durable", "durable"), ("floor-fastapi", "FastAPI")):
            other = by.get(name)
            if other is None:
                continue
            own = other.cpu_ms_per_turn.get("server", math.nan)
            kept = _ratio(own, floor.cpu_ms_per_turn.get("server", math.nan))
            mine = _ratio(sg.cpu_ms_per_turn.get("server", math.nan), own)
            out.append(
                Check(
                    f"(reading) the {label} floor's CPU / the floor's; sessiongate's / the"
                    f" {label} floor's",
                    True,
                    f"{fmt(kept)}x ({fmt(own)} ms); {fmt(mine)}x",
                )
            )
        ttft = _ratio(sg.added["c1_p50"], floor.added["c1_p50"])
        out.append(
            Check(
                f"added TTFT at c=1, p50 <= {TARGET_C1_VS_FLOOR:g}x the bare proxy's",
                ttft <= TARGET_C1_VS_FLOOR,
                f"{fmt(ttft)}x ({fmt(sg.added['c1_p50'])} vs {fmt(floor.added['c1_p50'])} ms)",
            )
        )
    out.append(Check("no failed turns", sg.errors == 0, f"{sg.errors} failed"))
    return out


def last_line(stacks: Sequence[Summary] | None) -> str:
    """The summary line printed last, whatever happened (NaN where a figure is missing)."""
    by = {s.target: s for s in stacks or ()}
    sg, lg, ll = by.get("sessiongate"), by.get("langgraph"), by.get("litellm")
    floor, durable = by.get("floor"), by.get("floor-durable")
    framework = by.get("floor-fastapi")
    nan = math.nan
    cap = sg.capacity_turns_per_s if sg else nan
    sg_cpu = sg.cpu_ms_per_turn.get("server", nan) if sg else nan
    sg_c1 = sg.added.get("c1_p50", nan) if sg else nan
    values = {
        "gateway_vs_langgraph_turns_ratio": _ratio(cap, lg.capacity_turns_per_s if lg else nan),
        "gateway_vs_litellm_turns_ratio": _ratio(cap, ll.capacity_turns_per_s if ll else nan),
        "c1_added_ttft_p50_ms": sg.added.get("c1_p50", nan) if sg else nan,
        "open_loop_added_ttft_p99_ms": sg.added.get("open_p99", nan) if sg else nan,
        "litellm_open_loop_added_ttft_p99_ms": ll.added.get("open_p99", nan) if ll else nan,
        "gateway_vs_floor_cpu_ratio": _ratio(
            sg_cpu, floor.cpu_ms_per_turn.get("server", nan) if floor else nan
        ),
        "c1_ttft_vs_floor_ratio": _ratio(sg_c1, floor.added.get("c1_p50", nan) if floor else nan),
        "c1_ttft_vs_langgraph_ratio": _ratio(sg_c1, lg.added.get("c1_p50", nan) if lg else nan),
        "open_loop_p99_vs_litellm_ratio": _ratio(
            sg.added.get("open_p99", nan) if sg else nan,
            ll.added.get("open_p99", nan) if ll else nan,
        ),
        "gateway_vs_durable_floor_cpu_ratio": _ratio(
            sg_cpu, durable.cpu_ms_per_turn.get("server", nan) if durable else nan
        ),
        "durable_floor_vs_floor_cpu_ratio": _ratio(
            durable.cpu_ms_per_turn.get("server", nan) if durable else nan,
            floor.cpu_ms_per_turn.get("server", nan) if floor else nan,
        ),
        "fastapi_floor_vs_floor_cpu_ratio": _ratio(
            framework.cpu_ms_per_turn.get("server", nan) if framework else nan,
            floor.cpu_ms_per_turn.get("server", nan) if floor else nan,
        ),
    }
    return " ".join(f"{k}={v:.2f}" for k, v in values.items())


def write_json(
    path: Path,
    meta: dict[str, Any],
    summaries: Sequence[Summary],
    found: list[Check],
    results: Results,
) -> None:
    payload = {
        **meta,
        "summaries": [asdict(s) for s in summaries],
        "targets": [asdict(c) for c in found],
        "last_line": last_line([s for s in summaries if s.target != "direct"]),
        "phases": {
            target: {
                phase: [
                    {
                        "wall_s": r.wall_s,
                        "sessions": r.sessions,
                        "offered_per_s": r.offered_per_s,
                        "cpu_s": r.cpu_s,
                        "samples": [
                            [x.turn, x.ttft_ms, x.total_ms, x.ok, x.lag_ms, x.at] for x in r.samples
                        ],
                    }
                    for r in rounds
                ]
                for phase, rounds in phases.items()
            }
            for target, phases in results.items()
        },
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
