"""The figures and printed tables of bench/handoff_stage2.py: what one classification
gave (`Outcome`), what a variant's classifications add up to, and the summary line."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiongate.core.handoff.intents import INTENTS
from support.common import percentile, render_table


@dataclass(frozen=True, slots=True)
class Outcome:
    """One classification. `status`: "act" (a hand-off), a reason of `decide`
    ("no_promise", "low_confidence"), or why there was no answer ("unparseable",
    "timeout", "model_error: <code>")."""

    corpus: str
    index: int
    label: str | None  # the promise's intent; None for an ordinary reply
    hard: bool
    stage1: bool
    status: str
    intent: str | None
    confidence: float | None
    ms: float
    answer: str


@dataclass(frozen=True, slots=True)
class VariantResult:
    variant: str
    refused: str | None  # the server refused the request shape: no rows were asked
    outcomes: list[Outcome]

    def of(self, corpus: str) -> list[Outcome]:
        return [o for o in self.outcomes if o.corpus == corpus]

    def figures(self) -> dict[str, Any]:
        ordinary, promising = self.of("ordinary"), self.of("promising")
        passed = [o for o in ordinary if o.stage1]
        by_intent: dict[str, dict[str, int]] = {}
        for intent in (*INTENTS, "all"):
            rows = [o for o in promising if intent in ("all", o.label)]
            by_intent[intent] = {
                "promises": len(rows),
                "stage1": sum(o.stage1 for o in rows),
                "kept": sum(o.stage1 and o.status == "act" and o.intent == o.label for o in rows),
                "stage2_alone": sum(o.status == "act" and o.intent == o.label for o in rows),
                "wrong_intent": sum(o.intent is not None and o.intent != o.label for o in rows),
                "wrong_handoffs": sum(o.status == "act" and o.intent != o.label for o in rows),
                "malformed": sum(o.status == "unparseable" for o in rows),
                "no_promise": sum(o.status == "no_promise" for o in rows),
                "low_confidence": sum(o.status == "low_confidence" for o in rows),
            }
        ms = [o.ms for o in self.outcomes]
        return {
            "variant": self.variant,
            "refused": self.refused,
            "ordinary_asked": len(ordinary),
            "ordinary_stage1": len(passed),
            "ordinary_stage1_handoffs": sum(o.status == "act" for o in passed),
            "ordinary_handoffs": sum(o.status == "act" for o in ordinary),
            "ordinary_hard": sum(o.hard for o in ordinary),
            "ordinary_hard_handoffs": sum(o.status == "act" and o.hard for o in ordinary),
            "statuses": dict(Counter(o.status for o in self.outcomes)),
            "promising": by_intent,
            "p50_ms": percentile(ms, 0.5),
            "p95_ms": percentile(ms, 0.95),
            "max_ms": max(ms, default=float("nan")),
            "mean_answer_chars": sum(len(o.answer) for o in self.outcomes) / max(1, len(ms)),
        }


def pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.1f}" if whole else "n/a"


def print_model(info: Mapping[str, Any]) -> None:
    template = "the file's" if info["chat_template"] else "none in the file"
    if info.get("chat_format"):
        template += f", served with llama-cpp-python's {info['chat_format']!r} format"
    print(
        f"\nmodel {info['label']} ({info['tuned']}): llama.cpp says {info['desc']!r}, "
        f"{info['n_params'] / 1e6:.0f} M parameters, file {info['file_bytes'] / 2**20:.1f} MiB, "
        f"chat template: {template}; {info['source']}; "
        f"llama-cpp-python {info['llama_cpp_python']}"
    )


def print_variant(result: VariantResult) -> None:
    if result.refused:
        print(f"  {result.variant}: refused by the server ({result.refused}); not measured")
        return
    f = result.figures()
    print(
        f"  ordinary: {f['ordinary_stage1_handoffs']} hand-offs of {f['ordinary_stage1']} "
        f"replies stage 1 passes; {f['ordinary_handoffs']} of all {f['ordinary_asked']} "
        f"asked ({pct(f['ordinary_handoffs'], f['ordinary_asked'])} %; "
        f"{f['ordinary_hard_handoffs']} of {f['ordinary_hard']} hard negatives)"
    )
    counts = ["stage1", "kept"]
    shares = [("kept", "stage1"), ("kept", "promises"), ("stage2_alone", "promises")]
    rest = ["wrong_intent", "wrong_handoffs", "malformed", "no_promise", "low_confidence"]
    headers = ["promises", "n", "stage 1", "kept", "kept % of passed", "kept % of all"]
    headers += ["stage 2 alone %", "wrong intent", "wrong hand-offs", "malformed", "no promise"]
    headers += ["low conf."]
    table = [
        [intent, str(c["promises"])]
        + [str(c[k]) for k in counts]
        + [pct(c[part], c[whole]) for part, whole in shares]
        + [str(c[k]) for k in rest]
        for intent, c in f["promising"].items()
    ]
    print(render_table(headers, table, set(range(1, len(headers)))))
    statuses = ", ".join(f"{k} {v}" for k, v in sorted(f["statuses"].items()))
    print(
        f"  all answers: {statuses}; latency p50 {f['p50_ms']:.0f} ms, p95 {f['p95_ms']:.0f} "
        f"ms, max {f['max_ms']:.0f} ms; {f['mean_answer_chars']:.0f} characters per answer"
    )
    bad = [o for o in result.outcomes if o.status in ("unparseable", "timeout")][:3]
    for o in bad:
        print(f"    e.g. {o.status}: {o.answer[:160]!r}")


def summary_line(runs: Sequence[Mapping[str, Any]]) -> str:
    """The better model's figures, `json_object` (the gateway as shipped) when measured."""
    best: tuple[tuple[float, int], str, dict[str, Any]] | None = None
    for run in runs:
        measured = [r for r in run["variants"] if not r.refused]
        if not measured:
            continue
        chosen = next((r for r in measured if r.variant == "json_object"), measured[0])
        f = chosen.figures()
        kept = f["promising"]["all"]
        rank = (kept["kept"] / max(1, kept["promises"]), -f["ordinary_handoffs"])
        if best is None or rank > best[0]:
            best = (rank, run["model"]["label"], f)
    if best is None:
        return "handoff_stage2_model=none ordinary_handoffs=0/0 promises_kept_pct=nan p50_ms=nan"
    _, label, f = best
    kept = f["promising"]["all"]
    return (
        f"handoff_stage2_model={label.replace(' ', '_')} "
        f"ordinary_handoffs={f['ordinary_handoffs']}/{f['ordinary_asked']} "
        f"promises_kept_pct={pct(kept['kept'], kept['promises'])} p50_ms={f['p50_ms']:.0f}"
    )
