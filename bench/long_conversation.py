"""A conversation far longer than its model's window (issue 21): the gateway-only part.

One key, `--turns` turns of 50 to 1,500 characters each, against a local OpenAI-wire stub
that enforces a `--window`-token window with OpenAI's `context_length_exceeded` answer
(tests/support/window_stub.py; its tokenizer counts a token per 3.5 characters, so the
gateway's estimate has something to correct). The gateway compacts after turns, for the
next one (docs/working_set.md). Measured: turns that failed, requests over the window,
tool results without their call in any request, messages of the segment neither sent raw
nor covered by the summary in force at the end, and the per-turn wall time (gateway and
stub, compaction excluded: it runs after the turn and is timed apart) of the last 50 turns
against turns 50 to 100.

Not in this version: tool turns (one in five, in the issue's version), LangGraph's
summarisation on the same stub, the llama.cpp run.

    .venv/bin/python bench/long_conversation.py --quick   # 1,000 turns
    .venv/bin/python bench/long_conversation.py           # 5,000 turns

The last line: `long_failed_turns=N over_window_requests=N orphan_tool_results=N
uncovered_messages=N per_turn_ratio_late_vs_early=R`.
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

from tests.support.window_stub import WindowStub  # noqa: E402

from sessiongate.config import Settings  # noqa: E402
from sessiongate.core.keys import KeyRef  # noqa: E402
from sessiongate.service.engine import build_engine  # noqa: E402
from sessiongate.service.sessions import Caller  # noqa: E402
from sessiongate.service.turn.pipeline import InboundTurn  # noqa: E402

WORDS = "meeting figures draft thursday budget travel invoice garden recipe train".split()


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


async def run(turns: int, window: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
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
                    agents={"defaults": {"model": "m"}},
                    lifecycle={"timezone": "UTC", "idle_window": "off", "day_boundary": "off"},
                )
            )
            caller = Caller("alice")
            failed, times, compaction_seconds = 0, [], 0.0
            try:
                for turn in range(turns):
                    size = rng.randint(50, 1500)
                    text = " ".join(rng.choice(WORDS) for _ in range(size // 7))
                    inbound = InboundTurn(key="long:one", caller=caller, content=f"{turn} {text}")
                    started = time.perf_counter()
                    events = [e async for e in engine.turns.run_turn(inbound)]
                    times.append(time.perf_counter() - started)
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
    early = statistics.median(times[50:100]) if turns >= 100 else statistics.median(times)
    late = statistics.median(times[-50:])
    print(
        f"turns={turns} window={window} messages={latest.message_count} "
        f"compactions={len(records)} compaction_seconds_total={compaction_seconds:.1f} "
        f"requests={len(stub.prompt_tokens)} max_prompt_tokens={max(stub.prompt_tokens)} "
        f"median_turn_ms_early={early * 1000:.1f} median_turn_ms_late={late * 1000:.1f} "
        f"calibration_ratio={engine.turns.calibration.ratio('m'):.2f}"
    )
    return {
        "long_failed_turns": failed,
        "over_window_requests": sum(1 for t in stub.prompt_tokens if t > window),
        "orphan_tool_results": sum(orphans(r.body or {}) for r in stub.requests),
        "uncovered_messages": context.dropped_messages,
        "per_turn_ratio_late_vs_early": late / early,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1,000 turns")
    parser.add_argument("--turns", type=int, default=None)
    parser.add_argument("--window", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=21)
    args = parser.parse_args()
    turns = args.turns or (1000 if args.quick else 5000)
    result = asyncio.run(run(turns, args.window, args.seed))
    print(
        " ".join(
            f"{k}={v:.2f}" if isinstance(v, float) and not v.is_integer() else f"{k}={int(v)}"
            for k, v in result.items()
        )
    )


if __name__ == "__main__":
    main()
