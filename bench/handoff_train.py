"""Train stage 1's learned backstop (`core/handoff/learned.py`) on the hand-off corpora
and measure it by leave-one-batch-out cross-validation.

The model: multinomial logistic regression (none / image / video / search) over the
n-grams `learned.grams` makes of the lowered reply, each feature
`1 / sqrt(number of grams)`, L2-regularised, fitted by full-batch gradient descent
(Adam) from zeros — no randomness, so the same rows give the same weights. N-grams
seen in fewer than `--min-df` training replies are not features; after fitting, the
`--keep` n-grams with the largest weights are kept (what ships).

Leave-one-batch-out: for each part of tests/data (dev, held-out, fresh-1 … fresh-4) a
model is trained on the other parts and measured on it. Two figures per threshold:

* the backstop alone, on every held-out row (pooled over the parts): recall per intent
  and the share of ordinary replies it sends to stage 2 — how well it generalises to a
  batch it never saw;
* stage 1 as shipped (the patterns, then the backstop when they find nothing) on
  fresh 4 held out: the patterns never saw fresh 4 either (written by someone else), so
  this is the honest estimate of both together.

The threshold written is the lowest at which the pooled backstop alone sends at most
`--max-fp` of the ordinary replies to stage 2 (more recall for each control-model call
allowed); the curve is printed so the choice can be checked.

    .venv/bin/python bench/handoff_train.py            # cross-validate, train, write
    .venv/bin/python bench/handoff_train.py --dry-run  # cross-validate only
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import numpy as np

from sessiongate.core.handoff.intents import INTENTS
from sessiongate.core.handoff.learned import (
    FEATURES,
    LABELS,
    WEIGHTS_FILE,
    LearnedModel,
    encode,
    grams,
)
from sessiongate.core.handoff.patterns import patterns_for
from support.common import REPO_DIR

DATA = REPO_DIR / "tests" / "data"
PARTS = ("dev", "held-out", "fresh-1", "fresh-2", "fresh-3", "fresh-4", "fresh-5")
#: The shipped weights were trained on the parts up to this one; fresh 5 was then measured
#: once, unseen (docs/benchmarks.md). `--through fresh-5` trains on it too.
SHIPPED_THROUGH = "fresh-4"
#: The batch its author wrote without seeing the patterns: the honest combined figure.
INDEPENDENT = "fresh-4"
THRESHOLDS = (0.05, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.6, 0.8)

Floats = tuple[float, ...]


@dataclass(frozen=True, slots=True)
class Example:
    text: str
    lowered: str
    part: str
    label: int  # index in LABELS
    grams: frozenset[str]


def load() -> list[Example]:
    examples = []
    for name in ("handoff_ordinary.jsonl", "handoff_promising.jsonl"):
        for line in (DATA / name).read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            row = json.loads(line)
            lowered = row["text"].lower()
            label = LABELS.index(row.get("intent") or "none")
            examples.append(
                Example(row["text"], lowered, row["part"], label, frozenset(grams(lowered)))
            )
    return examples


@dataclass(frozen=True, slots=True)
class Settings:
    l2: float
    min_df: int
    keep: int
    steps: int
    rate: float
    #: How much a promise counts against an ordinary reply in the loss (they are rarer).
    promise_weight: float = 1.0


#: What the shipped weights were trained with (the command-line defaults).
DEFAULTS = Settings(l2=3e-5, min_df=2, keep=6000, steps=150, rate=0.3, promise_weight=2.5)


def fit(examples: Sequence[Example], settings: Settings) -> LearnedModel:
    """A model trained on `examples` (threshold 0.5; the caller chooses another)."""
    counts: dict[str, int] = {}
    for example in examples:
        for gram in example.grams:
            counts[gram] = counts.get(gram, 0) + 1
    vocabulary = sorted(gram for gram, count in counts.items() if count >= settings.min_df)
    column = {gram: index for index, gram in enumerate(vocabulary)}
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    for index, example in enumerate(examples):
        scale = 1.0 / math.sqrt(len(example.grams))
        for gram in example.grams:
            found = column.get(gram)
            if found is not None:
                rows.append(index)
                cols.append(found)
                values.append(scale)
    row_of = np.asarray(rows, dtype=np.int64)
    col_of = np.asarray(cols, dtype=np.int64)
    value_of = np.asarray(values, dtype=np.float64)
    n, k, f = len(examples), len(LABELS), len(vocabulary)
    targets = np.zeros((n, k))
    targets[np.arange(n), [e.label for e in examples]] = 1.0

    row_weight = np.asarray(
        [settings.promise_weight if e.label else 1.0 for e in examples], dtype=np.float64
    )
    weights = np.zeros((f, k))
    bias = np.zeros(k)
    moments = [np.zeros_like(weights), np.zeros_like(weights), np.zeros(k), np.zeros(k)]
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    for step in range(1, settings.steps + 1):
        contributions = weights[col_of] * value_of[:, None]
        scores = np.zeros((n, k))
        for label in range(k):
            scores[:, label] = np.bincount(row_of, contributions[:, label], minlength=n)
        scores += bias
        scores -= scores.max(axis=1, keepdims=True)
        probabilities = np.exp(scores)
        probabilities /= probabilities.sum(axis=1, keepdims=True)
        error = (probabilities - targets) * row_weight[:, None] / row_weight.sum()
        per_entry = error[row_of] * value_of[:, None]
        gradient = (
            np.stack(
                [np.bincount(col_of, per_entry[:, label], minlength=f) for label in range(k)],
                axis=1,
            )
            + settings.l2 * weights
        )
        for parameter, grad, first, second in (
            (weights, gradient, moments[0], moments[1]),
            (bias, error.sum(axis=0), moments[2], moments[3]),
        ):
            first *= beta1
            first += (1 - beta1) * grad
            second *= beta2
            second += (1 - beta2) * grad * grad
            corrected = first / (1 - beta1**step)
            parameter -= settings.rate * corrected / (np.sqrt(second / (1 - beta2**step)) + eps)

    # Softmax ignores a constant added to a row: centre each, then keep the n-grams
    # that move some label most.
    weights -= weights.mean(axis=1, keepdims=True)
    importance = np.abs(weights).max(axis=1)
    kept = np.sort(np.argsort(-importance, kind="stable")[: settings.keep])
    kept_index = {vocabulary[i]: row for row, i in enumerate(kept)}
    return LearnedModel(
        FEATURES,
        0.5,
        kept_index,
        weights[kept].astype(np.float32),
        bias.astype(np.float32),
    )


# -- measuring -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scored:
    example: Example
    probabilities: Floats
    patterns: tuple[str, ...]  # what the shipped patterns match


def backstop_intent(scored: Scored, threshold: float) -> str | None:
    best = max(range(1, len(LABELS)), key=lambda label: scored.probabilities[label])
    return LABELS[best] if scored.probabilities[best] >= threshold else None


def figures(
    scored: Sequence[Scored], threshold: float, with_patterns: bool
) -> tuple[dict[str, float], float, int]:
    """Recall per intent, the share of ordinary replies reaching stage 2, and how many
    promises only the backstop found."""
    hits: dict[str, list[bool]] = {intent: [] for intent in INTENTS}
    false_positives = ordinary = only_backstop = 0
    for item in scored:
        matched = item.patterns if with_patterns else ()
        learned = None if matched else backstop_intent(item, threshold)
        found = matched or ((learned,) if learned else ())
        label = LABELS[item.example.label]
        if label == "none":
            ordinary += 1
            false_positives += bool(found)
        else:
            hits[label].append(label in found)
            only_backstop += label not in matched and label in found
    recall = {i: sum(h) / len(h) if h else float("nan") for i, h in hits.items()}
    return recall, false_positives / max(ordinary, 1), only_backstop


def cross_validate(examples: Sequence[Example], settings: Settings) -> list[Scored]:
    """Every row scored by a model trained on the other parts."""
    stage1 = patterns_for(INTENTS, {}, learned=False)  # the backstop would see its data
    scored = []
    for part in PARTS:
        held = [e for e in examples if e.part == part]
        if not held:
            continue
        model = fit([e for e in examples if e.part != part], settings)
        scored += [Scored(e, model.probabilities(e.lowered), stage1.match(e.text)) for e in held]
    return scored


def curve(scored: Sequence[Scored], max_fp: float) -> float:
    independent = [s for s in scored if s.example.part == INDEPENDENT]
    print(
        "threshold | backstop alone, all parts held out: image / video / search % (FP %)"
        f" | stage 1 on {INDEPENDENT} held out: image / video / search % (FP %, backstop-only)"
    )
    chosen = None
    for threshold in THRESHOLDS:
        alone, fp_alone, _ = figures(scored, threshold, with_patterns=False)
        both, fp_both, only = figures(independent, threshold, with_patterns=True)
        print(
            f"{threshold:.2f} | "
            + " / ".join(f"{100 * alone[i]:.1f}" for i in INTENTS)
            + f" ({100 * fp_alone:.1f}) | "
            + " / ".join(f"{100 * both[i]:.1f}" for i in INTENTS)
            + f" ({100 * fp_both:.1f}, {only})"
        )
        if chosen is None and fp_alone <= max_fp:
            chosen = threshold
    return chosen if chosen is not None else THRESHOLDS[-1]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--l2", type=float, default=DEFAULTS.l2)
    parser.add_argument("--min-df", type=int, default=DEFAULTS.min_df)
    parser.add_argument("--keep", type=int, default=DEFAULTS.keep, help="n-grams kept")
    parser.add_argument("--steps", type=int, default=DEFAULTS.steps)
    parser.add_argument("--rate", type=float, default=DEFAULTS.rate)
    parser.add_argument("--promise-weight", type=float, default=DEFAULTS.promise_weight)
    parser.add_argument("--max-fp", type=float, default=0.05, help="see the module doc")
    parser.add_argument("--dry-run", action="store_true", help="cross-validate only")
    parser.add_argument(
        "--through", choices=PARTS, default=SHIPPED_THROUGH, help="the last part trained on"
    )
    parser.add_argument("--out", type=Path, default=WEIGHTS_FILE)
    args = parser.parse_args(argv)
    settings = Settings(args.l2, args.min_df, args.keep, args.steps, args.rate, args.promise_weight)

    trained_parts = PARTS[: PARTS.index(args.through) + 1]
    examples = [e for e in load() if e.part in trained_parts]
    started = time.perf_counter()
    scored = cross_validate(examples, settings)
    print(f"# leave-one-batch-out ({len(scored)} rows, {time.perf_counter() - started:.1f} s)")
    threshold = curve(scored, args.max_fp)
    print(f"chosen threshold: {threshold:.2f} (lowest with backstop-alone FP <= {args.max_fp})")
    if args.dry_run:
        return 0

    model = fit(examples, settings)
    document = {
        "version": f"{date.today().isoformat()}-{len(examples)}rows",
        "features": FEATURES,
        "labels": list(LABELS),
        "threshold": threshold,
        "trained": {
            "rows": len(examples),
            "parts": list(trained_parts),
            **{name: getattr(settings, name) for name in Settings.__slots__},
        },
        "grams": list(model.index),
        "bias": encode(model.bias),
        "weights": encode(model.weights),
    }
    args.out.write_text(json.dumps(document, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB, {len(model.index)} n-grams)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
