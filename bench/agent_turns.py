"""Agent turns: a two-tool turn through the sessiongate gateway (the `chat` runner, and a
`plan_execute` turn) against LangGraph's prebuilt ReAct agent and the OpenAI Agents SDK,
all on the same stub model and the same two in-process tools.

Processes, all on 127.0.0.1 (this script re-runs itself with a hidden `--role`):

* the stub (support/agent_stub.py): OpenAI chat completions that ask for `lookup` and `add` in
  one step, then answer from their results; a plan for a JSON-mode request;
* the gateway (support/agent_gateway.py): `create_app(build_engine(settings))` under uvicorn, the
  `openai` provider pointed at the stub, the two tools added as `FunctionTool`s; and a
  diagnostic second gateway whose reply model answers in-process (`--stacks` inprocess);
* each peer (support/agent_peers.py), a fresh process per round, driving its own sessions
  in-process: LangGraph `create_react_agent` + `AsyncSqliteSaver`, the Agents SDK
  `Runner.run_streamed` + `SQLiteSession`;
* this process: the gateway's HTTP client (support/agent_client.py).

Per round, each on fresh keys: `--reps` times sessiongate `chat`, `plan_execute` and `chat`
with no tool asked (the baseline of the tool-step cost), then LangGraph, then the Agents
SDK; `--sessions` sessions at once (20), one untimed turn each, then `--turns` timed turns
each. Then, on each gateway, one turn at a time: tool and no-tool turns alternating (the
tool step again, as a difference of medians), and turns alternating between a key with
10 prior tool turns and one with `--history` (1,000), both seeded by importing an export
of a real tool turn repeated (support/agent_client.py). Figures and targets:
support/agent_report.py.

    .venv/bin/python bench/agent_turns.py --quick          # under 2 minutes
    .venv/bin/python bench/agent_turns.py                  # full run
    .venv/bin/python bench/agent_turns.py --quick --profile  # + cProfile of the gateway

The last line is always `agent_vs_langgraph_turns_ratio=<x> agent_vs_agents_sdk_turns_ratio=<y>
tool_step_overhead_ms=<z>` (one line; n/a where a figure is missing).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support.agent_client import GatewayClient, seed_histories
from support.agent_load import (
    Phase,
    TurnFn,
    checked_turn,
    closed_loop,
    process_cpu_clock,
    stub_requests,
)
from support.agent_peers import WARM_TURNS
from support.agent_report import (
    Alternating,
    History,
    last_line,
    report,
    summarise,
)
from support.common import (
    ensure_bench_extras,
    load_average,
    machine_busy_seconds,
    machine_line,
    run_async,
    version_of,
)
from support.procs import Child, start_child, stop_child

ENTRY = Path(__file__).resolve()
#: Turns each gateway served, by name ("sessiongate", "inprocess"), warm-ups included.
SERVED: dict[str, int] = {}
PEER_MODULES = ["langgraph.prebuilt", "langgraph.checkpoint.sqlite", "agents"]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    add = parser.add_argument
    add("--quick", action="store_true", help="a short run (under two minutes)")
    add("--sessions", type=int, default=20, help="concurrent sessions")
    add("--turns", type=int, help="timed turns per session and phase (full 15, quick 6)")
    add("--rounds", type=int, help="rounds of every stack (full 3, quick 1)")
    add(
        "--reps",
        type=int,
        help="gateway phases (chat, plan, no tool) per round, each on fresh keys (full 3, "
        "quick 2): they are short, so repeating them steadies their CPU figures",
    )
    add("--step-turns", type=int, help="c=1 tool/no-tool turn pairs (full 150, quick 60)")
    add("--history", type=int, default=1000, help="prior tool turns of the long key")
    add("--history-turns", type=int, help="timed turns per history key (full 60, quick 25)")
    add(
        "--stacks",
        default="sessiongate,langgraph,agents,inprocess",
        help="comma-separated subset; inprocess = a second gateway whose reply model answers "
        "in-process with no HTTP call (a diagnostic of sessiongate's own CPU per tool step)",
    )
    add("--profile", action="store_true", help="run the gateway under cProfile (CPU clock)")
    add("--json", type=Path, help="write every figure and sample to this JSON file")
    # Hidden: how this script runs its own processes.
    add("--role", choices=("stub", "gateway", "langgraph", "agents"), help=argparse.SUPPRESS)
    add("--ready-file", help=argparse.SUPPRESS)
    add("--stub-url", help=argparse.SUPPRESS)
    add("--stub-pid", help=argparse.SUPPRESS)
    add("--data-dir", help=argparse.SUPPRESS)
    add("--profile-out", help=argparse.SUPPRESS)
    add("--result-file", help=argparse.SUPPRESS)
    add("--label", help=argparse.SUPPRESS)
    add("--no-tools", action="store_true", help=argparse.SUPPRESS)
    add(
        "--gateway-model", choices=("openai", "inprocess"), default="openai", help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    args.turns = args.turns or (6 if args.quick else 15)
    args.rounds = args.rounds or (1 if args.quick else 3)
    args.reps = args.reps or (2 if args.quick else 3)
    args.step_turns = args.step_turns or (60 if args.quick else 150)
    args.history_turns = args.history_turns or (25 if args.quick else 60)
    return args


def start_role(name: str, role_args: list[str], workdir: Path, timeout: float = 60.0) -> Child:
    """`agent_turns.py --role ...` as a server; waits for its ready file."""
    return start_child(name, role_args, workdir, timeout, entry=ENTRY)


def run_peer(name: str, args: argparse.Namespace, stub: Child, workdir: Path, label: str) -> Phase:
    """One closed loop of a peer in a fresh process of its own."""
    data_dir = workdir / label
    data_dir.mkdir()
    result = data_dir / "result.json"
    command = [sys.executable, str(ENTRY), "--role", name, "--stub-url", stub.url]
    command += ["--stub-pid", str(stub.process.pid), "--data-dir", str(data_dir)]
    command += ["--sessions", str(args.sessions), "--turns", str(args.turns), "--label", label]
    command += ["--result-file", str(result)]
    log_path = data_dir / "peer.log"
    with open(log_path, "wb") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, timeout=900)
    if done.returncode != 0 or not result.exists():
        tail = log_path.read_text(errors="replace")[-3000:]
        raise RuntimeError(f"{name} failed (exit {done.returncode}):\n{tail}")
    return Phase(**json.loads(result.read_text()))


async def gateway_phases(
    args: argparse.Namespace,
    client: GatewayClient,
    stub: Child,
    gateway: Child,
    label: str,
    prefix: str,
    quiet: bool,
) -> list[Phase]:
    def cpu() -> dict[str, float]:
        return {
            "server": process_cpu_clock(gateway.process.pid),
            "stub": process_cpu_clock(stub.process.pid),
            "client": time.process_time(),
            "model_calls": stub_requests(stub.url),
        }

    phases = []
    for rep in range(args.reps):
        for stack, agent, tools in (
            ("chat", "main", True),
            ("plan", "plan", True),
            ("notool", "main", False),
        ):
            phase = Phase(f"{prefix}-{stack}", args.sessions, args.turns)
            where = f"{label}-{prefix}-{stack}-{rep}"
            await closed_loop(client.turn_fn(agent), phase, where, cpu, tools=tools)
            phases.append(phase)
    if not quiet:
        rates: dict[str, list[str]] = {}
        for phase in phases:
            rates.setdefault(phase.stack, []).append(f"{phase.turns_per_s:.1f}")
        for stack, values in rates.items():
            print(f"    {stack}: {', '.join(values)} turns/s", flush=True)
    return phases


async def alternate(
    runs: list[tuple[str, TurnFn, bool]], count: int, pid: int, into: Alternating
) -> None:
    """`count` rounds of one turn on each of `runs` (key, turn, tools), one at a time,
    after 2 untimed rounds; each turn's wall time and the gateway's CPU time during it."""
    for index in range(2 + count):
        for key, turn, tools in runs:
            before = process_cpu_clock(pid)
            elapsed = await checked_turn(turn, key, index, tools=tools)
            used = (process_cpu_clock(pid) - before) * 1000
            if index >= 2:
                into.wall_ms.setdefault(key, []).append(elapsed)
                into.cpu_ms.setdefault(key, []).append(used)


async def step_phase(args: argparse.Namespace, gateway: Child, label: str) -> Alternating:
    """Tool turns and no-tool turns alternating, one at a time: the tool step's CPU as
    a difference of medians, both measured under the same conditions."""
    client = GatewayClient(gateway.url, gateway.info["api_key"])
    found = Alternating()
    try:
        turn = client.turn_fn("main")
        runs = [("step-tool", turn, True), ("step-notool", turn, False)]
        await alternate(runs, args.step_turns, gateway.process.pid, found)
    finally:
        SERVED[label] = SERVED.get(label, 0) + client.sent
        await client.aclose()
    return found


async def history_phase(args: argparse.Namespace, client: GatewayClient, pid: int) -> History:
    """Turns alternating between a key with 10 prior tool turns and one with
    `args.history`, one at a time, after 2 untimed turns each."""
    keys = {"hist-short": 10, "hist-long": args.history}
    history = History(prior=keys)
    history.import_s = await seed_histories(client, "main", keys, "hist")
    turn = client.turn_fn("main")
    runs = [(key, turn, True) for key in keys]
    await alternate(runs, args.history_turns, pid, history)
    return history


def orchestrate(args: argparse.Namespace) -> int:
    ensure_bench_extras(PEER_MODULES)
    stacks = set(args.stacks.split(","))
    if "langgraph" in stacks:
        ensure_langchain_openai()
    began = time.perf_counter()
    busy_before, ours_before = machine_busy_seconds(), own_cpu_seconds()
    workdir = Path(tempfile.mkdtemp(prefix="sessiongate-agent-turns-"))
    profile_path = workdir / "gateway.prof" if args.profile else None
    print(
        f"agent_turns: {'quick' if args.quick else 'full'} run, {args.sessions} sessions x "
        f"{args.turns} timed turns per phase, {args.rounds} round(s); stacks: {args.stacks}",
        flush=True,
    )
    print(
        f"  machine: {machine_line()}; load average {load_average():.2f}; openai-agents "
        f"{version_of('openai-agents')}, langgraph {version_of('langgraph')}, "
        f"langgraph-prebuilt {version_of('langgraph-prebuilt')}, langgraph-checkpoint-sqlite "
        f"{version_of('langgraph-checkpoint-sqlite')}, langchain-openai "
        f"{version_of('langchain-openai')}, openai {version_of('openai')}",
        flush=True,
    )
    phases: list[Phase] = []
    history: History | None = None
    steps: dict[str, Alternating] = {}
    children: list[Child] = []
    succeeded = False
    try:
        stub = start_role("stub", ["stub"], workdir)
        children.append(stub)
        gateway = diagnostic = None
        if "sessiongate" in stacks:
            gateway_args = ["gateway", "--stub-url", stub.url, "--data-dir", str(workdir / "sg")]
            if profile_path:
                gateway_args += ["--profile-out", str(profile_path)]
            gateway = start_role("sessiongate", gateway_args, workdir)
            children.append(gateway)
        if "inprocess" in stacks:
            diagnostic_args = ["gateway", "--stub-url", stub.url, "--gateway-model", "inprocess"]
            diagnostic_args += ["--data-dir", str(workdir / "inprocess")]
            diagnostic = start_role("inprocess", diagnostic_args, workdir)
            children.append(diagnostic)
        warm = argparse.Namespace(**{**vars(args), "turns": WARM_TURNS, "reps": 1})
        for server, prefix in ((gateway, "sessiongate"), (diagnostic, "inprocess")):
            if server is not None:  # the peers warm up the same way (support/agent_peers.py)
                run_async(gateway_round(warm, stub, server, "warm", prefix, quiet=True))
        for round_index in range(args.rounds):
            print(f"  round {round_index + 1} of {args.rounds}", flush=True)
            label = f"r{round_index}"
            if gateway is not None:
                phases += run_async(gateway_round(args, stub, gateway, label, "sessiongate"))
            if diagnostic is not None:
                phases += run_async(gateway_round(args, stub, diagnostic, label, "inprocess"))
            for peer in ("langgraph", "agents"):
                if peer in stacks:
                    phase = run_peer(peer, args, stub, workdir, f"r{round_index}-{peer}")
                    print(f"    {peer}: {phase.turns_per_s:.1f} turns/s", flush=True)
                    phases.append(phase)
        for server, prefix in ((gateway, "sessiongate"), (diagnostic, "inprocess")):
            if server is not None and args.step_turns > 0:
                print(f"  {prefix}: tool step, one turn at a time", flush=True)
                steps[prefix] = run_async(step_phase(args, server, prefix))
        if gateway is not None and args.history > 0:
            print(f"  history: 10 vs {args.history:,} prior tool turns", flush=True)
            history = run_async(gateway_history(args, gateway))
        succeeded = True
    finally:
        for child in reversed(children):
            stop_child(child.process)
        if succeeded and not args.profile:
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"logs and data kept in {workdir}", file=sys.stderr)
    elapsed = time.perf_counter() - began
    others = machine_busy_seconds() - busy_before - (own_cpu_seconds() - ours_before)
    report(args, phases, history, steps, elapsed, profile_path, SERVED.get("sessiongate", 0))
    print(
        f"(other processes on the machine used {others / elapsed:.2f} of its "
        f"{os.cpu_count()} cores on average during the run)"
    )
    print(last_line(summarise(phases), steps))
    return 0


def own_cpu_seconds() -> float:
    """CPU of this process and of every child it started and waited for."""
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


async def gateway_round(
    args: argparse.Namespace,
    stub: Child,
    gateway: Child,
    label: str,
    prefix: str,
    *,
    quiet: bool = False,
) -> list[Phase]:
    client = GatewayClient(gateway.url, gateway.info["api_key"])
    try:
        return await gateway_phases(args, client, stub, gateway, label, prefix, quiet)
    finally:
        SERVED[prefix] = SERVED.get(prefix, 0) + client.sent
        await client.aclose()


async def gateway_history(args: argparse.Namespace, gateway: Child) -> History:
    client = GatewayClient(gateway.url, gateway.info["api_key"])
    try:
        return await history_phase(args, client, gateway.process.pid)
    finally:
        SERVED["sessiongate"] = SERVED.get("sessiongate", 0) + client.sent
        await client.aclose()


def ensure_langchain_openai() -> None:
    """LangGraph's agent needs a chat model: `ChatOpenAI` from langchain-openai, which the
    project's `bench` extra does not list yet; installed here when missing."""
    try:
        import langchain_openai  # noqa: F401
    except ImportError:
        print("bench: installing langchain-openai (LangGraph's OpenAI chat model)", flush=True)
        command = [sys.executable, "-m", "pip", "install", "-q", "langchain-openai>=1"]
        subprocess.run(command, check=True)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.role == "stub":
        from support.agent_stub import serve_agent_stub

        serve_agent_stub(args)
        return 0
    if args.role == "gateway":
        from support.agent_gateway import serve_agent_gateway

        serve_agent_gateway(args)
        return 0
    if args.role in ("langgraph", "agents"):
        from support.agent_peers import run_peer as run_peer_here

        run_peer_here(args)
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
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
