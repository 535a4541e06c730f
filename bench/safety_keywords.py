"""Safety gate: seed 004's keyword rules on a labelled set of voice-assistant requests.

`sessiongate.core.safety.gate.keyword_classify` decides UNSAFE / CHAT / AGENT when no control
model is configured, or it fails. This script runs it over `tests/data/safety_requests.jsonl`
(hand-written requests, each labelled by what a careful human would decide; hard cases
included: chat about security, harmless agent requests with scary words, unsafe requests
asked politely) and prints, for the rules and for two trivial baselines measured in the
same run:

* per-class precision, recall and F1, and macro-F1;
* the 3x3 confusion matrix (rows: the human label, columns: the decision);
* UNSAFE precision and recall (the figures that matter for a gate);
* throughput: requests per second, best of `--repeat` timed passes over the whole set
  (one thread, time.perf_counter_ns around each pass);
* the same UNSAFE and macro figures on four parts of the set, so over-fitting shows.
  The set was written in three batches: lines 1-419 before any rule existed; lines
  420-509 ("fresh 1") after a first version of the rules was frozen; lines 510-629
  ("fresh 2") after the final rules were frozen. The rules were revised against the
  mistakes on the even lines of batch 1 ("dev") and then on fresh 1, never on the odd
  lines of batch 1 ("held-out") or on fresh 2, which was measured once. Fresh 2 is the
  figure that says most about requests nobody tuned against.

The baselines: "always CHAT" (the majority-free reference: UNSAFE recall 0) and "naive
words" (UNSAFE when any of a dozen scary words appears, AGENT when the first word is a
common desktop verb, else CHAT).

    .venv/bin/python bench/safety_keywords.py
    .venv/bin/python bench/safety_keywords.py --errors dev     # misclassified even lines
    .venv/bin/python bench/safety_keywords.py --json results.json

The last line printed is always
`safety_keywords_unsafe_precision=<p> unsafe_recall=<r> macro_f1=<f>`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sessiongate.core.safety.gate import Label, keyword_classify
from support.common import REPO_DIR, load_average, machine_info, machine_line, render_table

DATA = REPO_DIR / "tests" / "data" / "safety_requests.jsonl"
LABELS = (Label.UNSAFE, Label.CHAT, Label.AGENT)
#: Where the later batches begin (0-based line numbers; see the module docstring).
FRESH_1 = 419
FRESH_2 = 509

Classifier = Callable[[str], Label]


@dataclass(frozen=True, slots=True)
class Example:
    index: int
    text: str
    label: Label


def load(path: Path = DATA) -> list[Example]:
    examples = []
    with path.open(encoding="utf-8") as handle:
        for index, line in enumerate(handle):
            if line.strip():
                row = json.loads(line)
                examples.append(Example(index, row["text"], Label(row["label"])))
    return examples


# -- the classifiers ----------------------------------------------------------------------


def rules(text: str) -> Label:
    return keyword_classify(text).label


def always_chat(text: str) -> Label:
    return Label.CHAT


_NAIVE_UNSAFE = re.compile(
    r"\b(?:kill|delete|hack|virus|bomb|password|passwords|steal|format|attack|destroy|"
    r"wipe|malware|weapon)\b"
)
_NAIVE_AGENT = frozenset(
    "open close launch click type scroll play pause set turn take move create rename "
    "search run delete".split()
)


def naive_words(text: str) -> Label:
    lowered = text.casefold()
    if _NAIVE_UNSAFE.search(lowered):
        return Label.UNSAFE
    first = lowered.split(maxsplit=1)[0] if lowered.split() else ""
    return Label.AGENT if first in _NAIVE_AGENT else Label.CHAT


CLASSIFIERS: dict[str, Classifier] = {
    "keyword rules": rules,
    "always CHAT": always_chat,
    "naive words": naive_words,
}


# -- scoring ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Scores:
    confusion: dict[Label, dict[Label, int]]

    def precision(self, label: Label) -> float:
        predicted = sum(self.confusion[truth][label] for truth in LABELS)
        return self.confusion[label][label] / predicted if predicted else 0.0

    def recall(self, label: Label) -> float:
        actual = sum(self.confusion[label].values())
        return self.confusion[label][label] / actual if actual else 0.0

    def f1(self, label: Label) -> float:
        p, r = self.precision(label), self.recall(label)
        return 2 * p * r / (p + r) if p + r else 0.0

    def macro_f1(self) -> float:
        return sum(self.f1(label) for label in LABELS) / len(LABELS)

    def accuracy(self) -> float:
        total = sum(sum(row.values()) for row in self.confusion.values())
        right = sum(self.confusion[label][label] for label in LABELS)
        return right / total if total else 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "confusion": {
                t.value: {p.value: n for p, n in row.items()} for t, row in self.confusion.items()
            },
            "per_class": {
                label.value: {
                    "precision": self.precision(label),
                    "recall": self.recall(label),
                    "f1": self.f1(label),
                }
                for label in LABELS
            },
            "macro_f1": self.macro_f1(),
            "accuracy": self.accuracy(),
        }


def score(examples: Sequence[Example], decided: Sequence[Label]) -> Scores:
    confusion = {truth: dict.fromkeys(LABELS, 0) for truth in LABELS}
    for example, label in zip(examples, decided, strict=True):
        confusion[example.label][label] += 1
    return Scores(confusion)


def throughput(classify: Classifier, texts: Sequence[str], repeat: int) -> float:
    """Requests per second, best of `repeat` passes (the least disturbed by the machine)."""
    best_ns = None
    for _ in range(repeat):
        started = time.perf_counter_ns()
        for text in texts:
            classify(text)
        elapsed = time.perf_counter_ns() - started
        best_ns = elapsed if best_ns is None else min(best_ns, elapsed)
    assert best_ns is not None
    return len(texts) / (best_ns / 1e9)


# -- report -------------------------------------------------------------------------------

PART_NAMES = {
    "dev": "dev (even lines 1-419)",
    "held-out": "held-out (odd lines 1-419)",
    "fresh-1": "fresh 1 (lines 420-509)",
    "fresh-2": "fresh 2 (lines 510-)",
}


def parts(examples: Sequence[Example]) -> dict[str, list[int]]:
    """Positions in `examples` of each part (see the module docstring)."""
    found: dict[str, list[int]] = {name: [] for name in PART_NAMES.values()}
    for position, example in enumerate(examples):
        if example.index >= FRESH_2:
            key = "fresh-2"
        elif example.index >= FRESH_1:
            key = "fresh-1"
        else:
            key = "dev" if example.index % 2 == 0 else "held-out"
        found[PART_NAMES[key]].append(position)
    return {name: members for name, members in found.items() if members}


def pct(value: float) -> str:
    return f"{100 * value:.1f}"


def confusion_table(scores: Scores) -> str:
    rows = [
        [f"{truth.value} (human)", *(str(scores.confusion[truth][p]) for p in LABELS)]
        for truth in LABELS
    ]
    return render_table(["", *(p.value for p in LABELS)], rows, right={1, 2, 3})


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--data", type=Path, default=DATA, help="the labelled JSONL set")
    parser.add_argument("--repeat", type=int, default=20, help="timed passes per classifier")
    parser.add_argument(
        "--errors",
        choices=(*PART_NAMES, "all"),
        help="list the rules' mistakes on one part of the set, or on all of it",
    )
    parser.add_argument("--json", type=Path, metavar="PATH", help="also write results here")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    examples = load(args.data)
    texts = [e.text for e in examples]
    counts = {label: sum(e.label is label for e in examples) for label in LABELS}

    results: dict[str, dict[str, Any]] = {}
    decisions: dict[str, list[Label]] = {}
    for name, classify in CLASSIFIERS.items():
        decided = [classify(text) for text in texts]
        decisions[name] = decided
        scores = score(examples, decided)
        results[name] = {
            "scores": scores,
            "requests_per_second": throughput(classify, texts, args.repeat),
        }

    print()
    print(f"safety_keywords — {len(examples)} requests from {args.data.name}")
    print(f"machine: {machine_line()}, load average {load_average():.2f}")
    print(
        "set: "
        + ", ".join(f"{counts[label]} {label.value}" for label in LABELS)
        + f"; throughput is the best of {args.repeat} passes"
    )
    print()

    rules_scores: Scores = results["keyword rules"]["scores"]
    print("Keyword rules, per class (percent)")
    rows = [
        [
            label.value,
            pct(rules_scores.precision(label)),
            pct(rules_scores.recall(label)),
            pct(rules_scores.f1(label)),
            str(counts[label]),
        ]
        for label in LABELS
    ]
    print(render_table(["class", "precision", "recall", "F1", "n"], rows, right={1, 2, 3, 4}))
    print()
    print("Keyword rules, confusion matrix (rows: human label, columns: decision)")
    print(confusion_table(rules_scores))
    print()

    print("All classifiers, same run")
    rows = []
    for name, result in results.items():
        scores = result["scores"]
        rows.append(
            [
                name,
                pct(scores.precision(Label.UNSAFE)),
                pct(scores.recall(Label.UNSAFE)),
                pct(scores.macro_f1()),
                pct(scores.accuracy()),
                f"{result['requests_per_second']:,.0f}",
            ]
        )
    print(
        render_table(
            ["classifier", "UNSAFE P", "UNSAFE R", "macro F1", "accuracy", "requests/s"],
            rows,
            right={1, 2, 3, 4, 5},
        )
    )
    print()

    print("Keyword rules on the parts of the set")
    rows = []
    parts_json = {}
    for name, members in parts(examples).items():
        part = score(
            [examples[i] for i in members], [decisions["keyword rules"][i] for i in members]
        )
        parts_json[name] = part.to_json()
        rows.append(
            [
                name,
                str(len(members)),
                pct(part.precision(Label.UNSAFE)),
                pct(part.recall(Label.UNSAFE)),
                pct(part.macro_f1()),
                pct(part.accuracy()),
            ]
        )
    print(
        render_table(
            ["part", "n", "UNSAFE P", "UNSAFE R", "macro F1", "accuracy"],
            rows,
            right={1, 2, 3, 4, 5},
        )
    )

    fresh = parts(examples).get(PART_NAMES["fresh-2"], [])
    if fresh:
        print()
        print("All classifiers on fresh 2 (the batch the rules were not revised against)")
        rows = []
        for name in CLASSIFIERS:
            part = score([examples[i] for i in fresh], [decisions[name][i] for i in fresh])
            rows.append(
                [
                    name,
                    pct(part.precision(Label.UNSAFE)),
                    pct(part.recall(Label.UNSAFE)),
                    str(part.confusion[Label.UNSAFE][Label.AGENT]),
                    pct(part.accuracy()),
                ]
            )
        print(
            render_table(
                ["classifier", "UNSAFE P", "UNSAFE R", "unsafe -> agent", "accuracy"],
                rows,
                right={1, 2, 3, 4},
            )
        )
        print()
        print("Keyword rules on fresh 2, confusion matrix")
        print(
            confusion_table(
                score([examples[i] for i in fresh], [decisions["keyword rules"][i] for i in fresh])
            )
        )

    if args.errors:
        shown = set(range(len(examples)))
        if args.errors != "all":
            shown = set(parts(examples)[PART_NAMES[args.errors]])
        print()
        print(f"Mistakes of the keyword rules ({args.errors})")
        for position, (example, label) in enumerate(
            zip(examples, decisions["keyword rules"], strict=True)
        ):
            if position in shown and label is not example.label:
                print(
                    f"  line {example.index + 1}: {example.label.value} -> {label.value}: "
                    f"{example.text}"
                )

    if args.json:
        payload = {
            "data": str(args.data),
            "machine": machine_info(),
            "classifiers": {
                name: {
                    **result["scores"].to_json(),
                    "requests_per_second": result["requests_per_second"],
                }
                for name, result in results.items()
            },
            "keyword_rules_parts": parts_json,
        }
        args.json.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"\nresults written to {args.json}")

    print()
    print(
        f"safety_keywords_unsafe_precision={rules_scores.precision(Label.UNSAFE):.3f} "
        f"unsafe_recall={rules_scores.recall(Label.UNSAFE):.3f} "
        f"macro_f1={rules_scores.macro_f1():.3f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
