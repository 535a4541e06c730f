"""A conversation far longer than its model's window (issue 21): the gateway-only part.

One key, `--turns` turns of 50 to 1,500 characters each, one in five a tool turn (the
model calls a `lookup` tool whose result is 200 to 800 characters), against a local
OpenAI-wire stub that enforces a `--window`-token window with OpenAI's
`context_length_exceeded` answer (tests/support/window_stub.py; its tokenizer counts a
token per 3.5 characters, so the gateway's estimate has something to correct). The
gateway compacts after turns, for the next one (docs/working_set.md). Measured: turns that
failed, requests over the window, tool results without their call in any request,
messages of the segment neither sent raw nor covered by the summary in force at the end,
and the per-turn cost of plain turns, the last 40 against turns 40 to 80 of the run: the
process's CPU time (gateway and stub: one process), which a busy machine disturbs far less
than the wall time, printed too; compactions run after a turn and are timed apart, with
their count.

In the same run, the same turns (same texts, same tool turns) go through LangGraph's
summarisation on a fresh stub of the same window (bench/support/long_langgraph.py: the
`create_agent` + `SummarizationMiddleware` of langchain 1.x), when the bench extra is
installed: its failed turns, its per-turn times, what its thread keeps of the raw
history. Not in this version: the llama.cpp run.

    /tmp/benchvenv/bin/python bench/long_conversation.py --quick   # 1,000 turns
    /tmp/benchvenv/bin/python bench/long_conversation.py           # 5,000 turns

(any venv with sessiongate works; LangGraph's row needs the `bench` extra). The last
line: `long_failed_turns=N over_window_requests=N orphan_tool_results=N
uncovered_messages=N per_turn_ratio_late_vs_early=R langgraph_failed_turns=N`.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from tests.support.window_stub import TOOL_MARKER, WindowStub  # noqa: E402

from sessiongate.agents.tools import FunctionTool, StaticToolSource, ToolContext  # noqa: E402
from sessiongate.config import Settings  # noqa: E402
from sessiongate.core.keys import KeyRef  # noqa: E402
from sessiongate.core.tool_calls import ToolSpec  # noqa: E402
from sessiongate.service.engine import build_engine  # noqa: E402
from sessiongate.service.sessions import Caller  # noqa: E402
from sessiongate.service.turn.pipeline import InboundTurn  # noqa: E402
from support import long_langgraph  # noqa: E402

WORDS = "meeting figures draft thursday budget travel invoice garden recipe train".split()
#: One turn in this many asks for the tool.
TOOL_EVERY = 5


def turn_plan(turns: int, seed: int) -> list[tuple[str, bool]]:
    """(text, tool turn?) for every turn: the same for the gateway and the peer."""
    rng = random.Random(seed)
    plan = []
    for turn in range(turns):
        size = rng.randint(50, 1500)
        text = " ".join(rng.choice(WORDS) for _ in range(size // 7))
        tool_turn = turn % TOOL_EVERY == TOOL_EVERY - 1
        plan.append((f"{turn} {TOOL_MARKER + ' ' if tool_turn else ''}{text}", tool_turn))
    return plan


def lookup_text(key: str) -> str:
    """The tool's result: 200 to 800 characters, fixed by the key."""
    rng = random.Random(key)
    return f"{key}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(30, 110)))


def lookup_source() -> StaticToolSource:
    async def lookup(arguments: dict[str, Any], context: ToolContext) -> str:
        return lookup_text(str(arguments.get("key", "")))

    schema = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
    spec = ToolSpec("lookup", "Look up the record stored under a key.", schema)
    return StaticToolSource("bench", [FunctionTool(spec, lookup)])


def orphans(body: Any) -> int:
    """Tool results in one request whose call is not in the assistant message before."""
    count, pending = 0, set()
    for message in body.get("messages", []):
        if message.get("role") == "tool":
            if message.get("tool_call_id") not in pending:
                count += 1
            continue
        pending = {c.get("id") for c in message.get("tool_calls") or []}
    return count


async def run_gateway(plan: list[tuple[str, bool]], window: int) -> dict[str, float]:
    async with WindowStub(window, reply="noted: " + " ".join(WORDS[:6])) as stub:
        with tempfile.TemporaryDirectory() as data:
            engine = build_engine(
                Settings(
                    data_dir=Path(data),
                    models={
                        "m": {
                            "provider": "openai",
                            "model": "stub",
                            "base_url": stub.url + "/v1",
                            "max_retries": 0,
                            "context_window": window,
                        }
                    },
                    agents={"defaults": {"model": "m", "tools": ["lookup"]}},
                    lifecycle={"timezone": "UTC", "idle_window": "off", "day_boundary": "off"},
                )
            )
            engine.tools.add_source(lookup_source())
            caller = Caller("alice")
            failed, compaction_seconds = 0, 0.0
            times: list[float] = []
            cpu_times: list[float] = []
            tool_times: list[float] = []
            try:
                for text, tool_turn in plan:
                    inbound = InboundTurn(key="long:one", caller=caller, content=text)
                    started, cpu = time.perf_counter(), time.process_time()
                    events = [e async for e in engine.turns.run_turn(inbound)]
                    (tool_times if tool_turn else times).append(time.perf_counter() - started)
                    if not tool_turn:
                        cpu_times.append(time.process_time() - cpu)
                    if events[-1].type != "end":
                        failed += 1
                    started = time.perf_counter()
                    await engine.turns.drain()  # the compaction after the turn, timed apart
                    compaction_seconds += time.perf_counter() - started
                segment, context = await engine.turns.preview_context("long:one", caller)
                rows = engine.turns.compactor.rows
                records = await rows.for_segment(segment.session_id) if rows else []
                latest = await engine.store.latest_segment(KeyRef("alice", "long:one"))
            finally:
                await engine.aclose()
    early, late = early_and_late(times)
    cpu_early, cpu_late = early_and_late(cpu_times)
    print(
        f"sessiongate: turns={len(plan)} tool_turns={len(tool_times)} window={window} "
        f"messages={latest.message_count} compactions={len(records)} "
        f"compaction_seconds_total={compaction_seconds:.1f} "
        f"median_tool_turn_ms={statistics.median(tool_times) * 1000 if tool_times else 0:.1f} "
        f"requests={len(stub.prompt_tokens)} max_prompt_tokens={max(stub.prompt_tokens)} "
        f"median_turn_ms_early={early * 1000:.1f} median_turn_ms_late={late * 1000:.1f} "
        f"median_turn_cpu_ms_early={cpu_early * 1000:.1f} "
        f"median_turn_cpu_ms_late={cpu_late * 1000:.1f} "
        f"calibration_ratio={engine.turns.calibration.ratio('m'):.2f}"
    )
    return {
        "long_failed_turns": failed,
        "over_window_requests": sum(1 for t in stub.prompt_tokens if t > window),
        "orphan_tool_results": sum(orphans(r.body or {}) for r in stub.requests),
        "uncovered_messages": context.dropped_messages,
        "per_turn_ratio_late_vs_early": cpu_late / cpu_early,
    }


def early_and_late(times: list[float]) -> tuple[float, float]:
    """Medians of turns 40-80 and of the last 40 (of all, in a short run)."""
    early = statistics.median(times[40:80]) if len(times) >= 80 else statistics.median(times)
    return early, statistics.median(times[-40:])


async def run(turns: int, window: int, seed: int) -> dict[str, float]:
    plan = turn_plan(turns, seed)
    result = await run_gateway(plan, window)
    result["langgraph_failed_turns"] = float("nan")
    if not long_langgraph.available():
        print("langgraph: not installed (the bench extra); langgraph_failed_turns=n/a")
        return result
    async with WindowStub(window, reply="noted: " + " ".join(WORDS[:6])) as stub:
        peer = await long_langgraph.run_langgraph(plan, window, stub.url, lookup_text)
    over = sum(1 for t in stub.prompt_tokens if t > window)
    print(
        f"langgraph: turns={peer['turns']} failed_turns={peer['failed_turns']} "
        f"errors={peer['errors']} requests={len(stub.prompt_tokens)} over_window_requests={over} "
        f"orphan_tool_results={sum(orphans(r.body or {}) for r in stub.requests)} "
        f"messages_in_state={peer['messages_in_state']} "
        f"raw_messages_in_state={peer['raw_messages_in_state']} "
        f"median_turn_ms_early={peer['median_turn_ms_early']:.1f} "
        f"median_turn_ms_late={peer['median_turn_ms_late']:.1f} "
        f"median_turn_cpu_ms_early={peer['median_turn_cpu_ms_early']:.1f} "
        f"median_turn_cpu_ms_late={peer['median_turn_cpu_ms_late']:.1f} "
        f"late_vs_early={peer['late_vs_early']:.2f}"
    )
    result["langgraph_failed_turns"] = peer["failed_turns"]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 turns")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    turns = args.turns or (1000 if args.quick else 5000)
    result = asyncio.run(run(turns, args.window, args.seed))
    print(" ".join(f"{k}={figure(v)}" for k, v in result.items()))


def figure(value: float) -> str:
    if value != value:  # NaN: not measured
        return "n/a"
    return f"{value:.2f}" if not float(value).is_integer() else str(int(value))


if __name__ == "__main__":
    main()
