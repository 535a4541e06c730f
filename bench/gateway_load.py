"""Gateway load: added time-to-first-token and turns per second, sessiongate against the
LiteLLM proxy and a FastAPI + LangGraph stack, all in front of the same local stub model.

Processes, all on 127.0.0.1 with ephemeral ports (this script re-runs itself with a hidden
`--role` for its own servers, so each has its own interpreter and GIL):

* the stub model (support/stub.py): an OpenAI-compatible streaming
  `POST /v1/chat/completions`;
* the stacks (support/stacks.py): sessiongate (SQLite, the `openai` provider pointed at the
  stub), the floor (support/stacks_floor.py: a bare pass-through proxy, what a Python
  gateway doing nothing costs), the LangGraph stack (support/stacks_langgraph.py), the
  LiteLLM proxy from its own virtual environment at a pinned version
  (support/stacks_litellm.py), and with `--postgres-url` `sessiongate serve` with
  `--workers` processes on PostgreSQL (support/gwload_workers.py);
* the client (support/client.py, this process): one keep-alive connection per session.

Phases (support/phases.py), for every stack and for the stub sent the same requests
directly: c=1 (one session alone), a closed loop of 50 sessions on an instant stub
(capacity, turns/s), the same on a stub whose first token comes alone, an open loop of
Poisson arrivals over 50 sessions at half of that second capacity, and 50 sessions in
lockstep. Added TTFT = TTFT through a stack - TTFT direct to the stub in the same phase
(support/report.py).

    .venv/bin/python bench/gateway_load.py --quick      # about 2 minutes
    .venv/bin/python bench/gateway_load.py              # full run
    .venv/bin/python bench/gateway_load.py --quick --profile   # + cProfile of the gateway
    .venv/bin/python bench/gateway_load.py --quick --gateway-model raw   # diagnostics

The first run creates bench/.venv-litellm (about half a minute with a warm pip cache), and
installs the project's `bench` extra into this interpreter if it is missing.

The last line printed is always
`gateway_vs_langgraph_turns_ratio=<x> gateway_vs_litellm_turns_ratio=<y>
c1_added_ttft_p50_ms=<a> open_loop_added_ttft_p99_ms=<b>
litellm_open_loop_added_ttft_p99_ms=<c> gateway_vs_floor_cpu_ratio=<d>
c1_ttft_vs_floor_ratio=<e> c1_ttft_vs_langgraph_ratio=<f> open_loop_p99_vs_litellm_ratio=<g>`
(one line; NaN where a figure is missing).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

from support.common import (
    ensure_bench_extras,
    machine_busy_seconds,
    machine_info,
    machine_line,
    run_async,
    version_of,
)
from support.phases import Plan, drive
from support.profile_report import print_profile
from support.report import checks, last_line, summarise_all, table, write_json
from support.stacks import Stacks, serve_baseline, serve_floor, serve_gateway, start_stacks
from support.stub import serve_stub


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add = parser.add_argument
    add("--quick", action="store_true", help="a short run (about two minutes)")
    add("--sessions", type=int, default=50, help="concurrent sessions")
    add("--tokens", type=int, default=20, help="tokens per stub reply")
    add("--stub-ttft-ms", type=float, default=10.0, help="paced/split stub: first token")
    add("--stub-interval-ms", type=float, default=10.0, help="paced stub: gap between tokens")
    add("--paced-turns", type=int, help="turns per session, lockstep phase")
    add("--instant-turns", type=int, help="turns per session, closed-loop capacity phase")
    add("--rounds", type=int, help="rounds of the capacity and lockstep phases")
    add("--open-seconds", type=float, help="length of one open-loop phase")
    add("--open-load", type=float, default=0.5, help="open-loop arrival rate, x capacity")
    add(
        "--open-capacity",
        choices=("own", "sessiongate"),
        default="own",
        help="whose closed-loop turns/s sets a stack's open-loop rate (default: its own)",
    )
    add("--seed", type=int, default=20260324, help="seed of the open-loop arrival schedule")
    add(
        "--gateway-model",
        choices=("auto", "config", "openai-class", "httpx", "raw", "inprocess"),
        default="auto",
        help="how the gateway reaches the stub: the openai provider from config, the "
        "OpenAIChatModel class injected, or the bench's own httpx adapter (auto: first usable); "
        "raw = bare asyncio HTTP/1.1 client; inprocess = no upstream call at all (the last "
        "two are diagnostics that isolate the gateway's own cost)",
    )
    add("--access-log", action="store_true", help="access logs on (every server)")
    add(
        "--profile",
        nargs="?",
        const="cprofile",
        choices=("cprofile", "pyinstrument"),
        help="run the gateway under cProfile (default) or pyinstrument (must be importable, "
        "e.g. PYTHONPATH=/tmp/pyinst) and print where its time goes",
    )
    add("--json", type=Path, help="write every figure and sample to this JSON file")
    add(
        "--postgres-url",
        help="also run `sessiongate serve` with --workers processes on this PostgreSQL server"
        " (a fresh database is created and dropped; the role needs CREATEDB)",
    )
    add("--workers", type=int, default=2, help="workers for --postgres-url")
    add("--no-litellm", action="store_true", help="leave the LiteLLM proxy out")
    add("--litellm-workers", type=int, default=1, help="LiteLLM proxy worker processes")
    # Hidden: how this script runs its own server processes.
    add(
        "--no-responses",
        action="store_true",
        help="leave out the Responses API rows (bench/support/responses_row.py)",
    )
    add("--role", choices=("stub", "gateway", "baseline", "floor"), help=argparse.SUPPRESS)
    add("--ready-file", help=argparse.SUPPRESS)
    add("--stub-url", help=argparse.SUPPRESS)
    add("--data-dir", help=argparse.SUPPRESS)
    add("--profile-out", help=argparse.SUPPRESS)
    add("--floor-kind", choices=("bare", "fastapi"), default="bare", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def make_plan(args: argparse.Namespace) -> Plan:
    plan = Plan(sessions=args.sessions, tokens=args.tokens, seed=args.seed)
    plan.open_load, plan.open_capacity = args.open_load, args.open_capacity
    if args.quick:
        plan.single_turns, plan.single_instant_turns = 15, 100
        plan.capacity_turns, plan.split_turns = 12, 8
        plan.lockstep_turns, plan.rounds = 6, 1
        plan.open_seconds, plan.open_rounds = 4.0, 1
    plan.lockstep_turns = args.paced_turns or plan.lockstep_turns
    plan.capacity_turns = args.instant_turns or plan.capacity_turns
    plan.rounds = args.rounds or plan.rounds
    plan.open_seconds = args.open_seconds or plan.open_seconds
    return plan


def own_cpu_seconds(stacks: Stacks) -> float:
    """CPU used so far by this process and every server it started (not PostgreSQL's)."""
    servers = sum(float(s.cpu_seconds()) for s in (stacks.stub, *stacks.servers))
    return time.process_time() + servers


def orchestrate(args: argparse.Namespace) -> int:
    ensure_bench_extras(["langgraph", "langchain_core", "langgraph.checkpoint.sqlite"])
    plan = make_plan(args)
    began = time.perf_counter()
    workdir = Path(tempfile.mkdtemp(prefix="sessiongate-gwload-"))
    profile_path = None
    if args.profile:
        profile_path = workdir / (
            "gateway.txt" if args.profile == "pyinstrument" else "gateway.prof"
        )
    print(
        f"gateway_load: {'quick' if args.quick else 'full'} run, {plan.sessions} sessions, "
        f"{plan.tokens} tokens/reply; paced stub = first token after {args.stub_ttft_ms:g} ms "
        f"then every {args.stub_interval_ms:g} ms",
        flush=True,
    )
    stacks = None
    succeeded = False
    try:
        stacks = start_stacks(args, workdir, profile_path)
        servers = stacks.by_name()
        print(f"  gateway model adapter: {servers['sessiongate'].info['model_path']}")
        print(
            f"  machine: {machine_line()}; uvicorn {version_of('uvicorn')}, langgraph "
            f"{version_of('langgraph')}, langgraph-checkpoint-sqlite "
            f"{version_of('langgraph-checkpoint-sqlite')}"
            + (f", litellm {servers['litellm'].info['version']}" if "litellm" in servers else "")
        )
        pids = ", ".join(f"{s.name} {s.process.pid}" for s in (stacks.stub, *stacks.servers))
        print(f"  processes: {pids}; client {os.getpid()}", flush=True)
        ours_before = own_cpu_seconds(stacks)
        busy_before, wall_before = machine_busy_seconds(), time.perf_counter()
        results = run_async(drive(plan, stacks))
        others = machine_busy_seconds() - busy_before - (own_cpu_seconds(stacks) - ours_before)
        others_cores = others / (time.perf_counter() - wall_before)
        rows = None
        if not args.no_responses:  # after the phases: their CPU figures do not include it
            from support.responses_row import responses_rows

            sessions, turns = (10, 10) if args.quick else (20, 30)
            rows = run_async(responses_rows(stacks, sessions=sessions, turns=turns))
        succeeded = True
    finally:
        if stacks is not None:
            stacks.stop()
        if succeeded and not args.profile:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"server logs and data kept in {workdir}", file=sys.stderr)
    elapsed = time.perf_counter() - began

    direct, summaries = summarise_all(results)
    capacity_from = "its own" if plan.open_capacity == "own" else "sessiongate's"
    print(
        f"\nResults ({elapsed:.0f} s). Open loop: Poisson arrivals at {plan.open_load:g} x "
        f"{capacity_from} closed-loop turns/s on the split stub, over {plan.sessions} sessions, "
        f"{plan.open_seconds:g} s x {plan.open_rounds}; server = the stack's process(es), "
        "client = this process\n"
    )
    print(table(direct, summaries, plan))
    print(
        f"\nOther processes on the machine used {others_cores:.2f} cores on average while the "
        f"phases ran (of {os.cpu_count()}; a PostgreSQL server counts here)."
    )
    if rows:
        from support.responses_row import report

        print("\n" + report(rows))
    found = checks(summaries)
    print("\nTargets (sessiongate)")
    for check in found:
        print(f"  [{'PASS' if check.passed else 'FAIL'}] {check.name}: {check.detail}")
    if profile_path is not None and profile_path.exists():
        turns = sum(len(r.samples) for rs in results["sessiongate"].values() for r in rs)
        print_profile(profile_path, turns)
        print("  (the profiler slows the gateway several-fold: use the figures above from a run")
        print("  without --profile)")
    if args.json:
        meta = {
            "mode": "quick" if args.quick else "full",
            "elapsed_seconds": round(elapsed, 1),
            "machine": {**machine_info(), "other_processes_cores": others_cores},
            "plan": asdict(plan),
            "stub": {"ttft_ms": args.stub_ttft_ms, "interval_ms": args.stub_interval_ms},
        }
        write_json(args.json, meta, [direct, *summaries], found, results)
        print(f"\nresults written to {args.json}")
    print(last_line(summaries))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    roles: dict[str, Callable[[argparse.Namespace], None]] = {
        "stub": serve_stub,
        "gateway": serve_gateway,
        "baseline": serve_baseline,
        "floor": serve_floor,
    }
    if args.role:
        roles[args.role](args)
        return 0
    try:
        return orchestrate(args)
    except Exception:  # the run failed: say why, and still end with the summary line
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        print(last_line(None))
        return 1


if __name__ == "__main__":
    sys.exit(main())
