"""The working set: which messages of a long thread the model sees raw, which it sees
through a summary, and what is compacted next. Pure (docs/working_set.md).

The thread is cut into *units*: a plain message, or a tool step (the assistant message
that asked for tools with its results, core/tool_calls.py) — a unit is sent whole, summarised
whole or trimmed whole, never split. A compaction record covers the seqs `first_seq`
through `last_seq` of its segment; the newest one not reverted is *in force*. The rule:

1. A unit wholly inside the record in force is *covered* (the model reads the summary),
   unless it holds a pinned message; every other unit is a candidate to go raw.
2. Over the budget, the oldest unpinned raw units go first, then the summary, then pins
   oldest first; never the newest unit (the model must see what it answers). Whatever
   goes and no summary sent covers is *trimmed*: the caller announces it.
3. With compaction on, past `compact_at` of the budget (or more raw messages than the
   memory window) the next compaction is planned: the oldest uncovered units, keeping the
   newest `keep_recent` messages raw, at most what a summariser can read in one budget.
   It folds the record in force, so its coverage is exactly what the summariser reads.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

Compaction = Literal["auto", "off"]
CarryOver = Literal["off", "summary"]

DEFAULT_COMPACT_AT = 0.75
DEFAULT_KEEP_RECENT = 8


@dataclass(frozen=True, slots=True)
class WorkingSetPolicy:
    """An agent's `[agents.X.context]`, resolved."""

    compaction: Compaction = "auto"
    reserve_tokens: int | None = None
    compact_at: float = DEFAULT_COMPACT_AT
    keep_recent: int = DEFAULT_KEEP_RECENT
    summary_model: str | None = None
    #: `summary`: a segment a rotation by idle, day boundary or topic made starts its
    #: context with a summary of the previous segment (service/carry_over.py).
    carry_over: CarryOver = "off"


DEFAULT_POLICY = WorkingSetPolicy()


@dataclass(frozen=True, slots=True)
class CompactionRecord:
    """A summary of seqs `first_seq`..`last_seq` of one segment, kept beside the raw
    messages (which stay as they were)."""

    compaction_id: str
    session_id: str
    first_seq: int
    last_seq: int
    count: int
    summary: str
    model: str
    tokens_before: int
    tokens_after: int
    created_at: datetime
    previous_compaction_id: str | None = None
    instructions: str | None = None
    reverted: bool = False

    def covers(self, seq: int) -> bool:
        return self.first_seq <= seq <= self.last_seq

    def covers_all(self, unit: Unit) -> bool:
        return self.first_seq <= unit.first and unit.last <= self.last_seq


@dataclass(frozen=True, slots=True)
class Unit:
    """Messages that go together (seqs ascending) and what they cost in tokens."""

    seqs: tuple[int, ...]
    tokens: int
    pinned: bool = False

    @property
    def first(self) -> int:
        return self.seqs[0]

    @property
    def last(self) -> int:
        return self.seqs[-1]


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What the next summary reads: the summary in force (folded) and these units; its
    record covers `first_seq`..`last_seq`, nothing it did not read."""

    previous: CompactionRecord | None
    units: tuple[Unit, ...]

    @property
    def first_seq(self) -> int:
        return self.previous.first_seq if self.previous is not None else self.units[0].first

    @property
    def last_seq(self) -> int:
        return self.units[-1].last

    @property
    def read_seqs(self) -> tuple[int, ...]:
        return tuple(s for u in self.units for s in u.seqs)


@dataclass(frozen=True, slots=True)
class WorkingSet:
    summary: CompactionRecord | None
    raw: tuple[Unit, ...]
    covered: tuple[int, ...]
    trimmed: tuple[int, ...]
    tokens: int
    #: What the context would have cost with every candidate raw (before anything went).
    tokens_wanted: int
    next_compaction: CompactionPlan | None = None
    #: The newest unit alone (with the fixed text) passes the budget: sent anyway.
    over_budget: bool = False


def in_force(compactions: Sequence[CompactionRecord]) -> CompactionRecord | None:
    """The newest record not reverted (by `last_seq`, then `created_at`)."""
    live = [c for c in compactions if not c.reverted]
    if not live:
        return None
    return max(live, key=lambda c: (c.last_seq, c.created_at))


def render_summary(record: CompactionRecord) -> str:
    """The system message the model reads in place of the covered messages."""
    return (
        f"Summary of messages #{record.first_seq} to #{record.last_seq} of this conversation "
        f"({record.count} messages, compaction {record.compaction_id}); the originals are "
        f"kept and can be shown:\n{record.summary}"
    )


def select(
    units: Sequence[Unit],
    *,
    compactions: Sequence[CompactionRecord] = (),
    budget: int | None,
    fixed_tokens: int = 0,
    summary_tokens: Callable[[CompactionRecord], int] = lambda r: 0,
    policy: WorkingSetPolicy = DEFAULT_POLICY,
    memory_window: int | None = None,
) -> WorkingSet:
    """The working set of one turn (the rule is in the module's docstring). `units` are
    the thread's, oldest first; `fixed_tokens` is the system text's cost."""
    record = in_force(compactions)
    covered: list[int] = []
    candidates: list[Unit] = []
    for index, unit in enumerate(units):
        last = index == len(units) - 1  # what the model answers: always raw
        if record is not None and not unit.pinned and not last and record.covers_all(unit):
            covered.extend(unit.seqs)
        else:
            candidates.append(unit)
    # It also stands for what is older than the thread given (a window's tail): sent
    # when it covers anything before the first unit, even with no unit inside it.
    before = record is not None and bool(units) and record.first_seq < units[0].first
    summary = record if record is not None and (covered or before) else None
    summary_cost = summary_tokens(summary) if summary is not None else 0
    wanted = fixed_tokens + summary_cost + sum(u.tokens for u in candidates)
    plan = _plan(record, candidates, budget, wanted, policy, memory_window)
    if budget is None or wanted <= budget:
        return WorkingSet(summary, tuple(candidates), tuple(covered), (), wanted, wanted, plan)

    # Over the budget: unpinned raw units oldest first, then the summary, then pins.
    kept = list(candidates)
    trimmed: list[int] = []
    total = wanted
    newest = kept[-1] if kept else None
    for unit in [u for u in candidates if not u.pinned and u is not newest]:
        if total <= budget:
            break
        kept.remove(unit)
        trimmed.extend(unit.seqs)
        total -= unit.tokens
    if total > budget and summary is not None:
        trimmed.extend(covered)
        covered = []
        total -= summary_cost
        summary = None
    for unit in [u for u in candidates if u.pinned and u is not newest]:
        if total <= budget:
            break
        kept.remove(unit)
        if record is not None and summary is not None and record.covers_all(unit):
            covered.extend(unit.seqs)
        else:
            trimmed.extend(unit.seqs)
        total -= unit.tokens
    return WorkingSet(
        summary,
        tuple(kept),
        tuple(sorted(covered)),
        tuple(sorted(trimmed)),
        total,
        wanted,
        plan,
        over_budget=total > budget,
    )


def _plan(
    record: CompactionRecord | None,
    candidates: Sequence[Unit],
    budget: int | None,
    wanted: int,
    policy: WorkingSetPolicy,
    memory_window: int | None,
) -> CompactionPlan | None:
    """The next compaction, when one is due: the oldest candidates after the record in
    force, keeping the newest `keep_recent` messages raw; at most what fits one budget."""
    if policy.compaction != "auto" or budget is None:
        return None
    raw_count = sum(len(u.seqs) for u in candidates)
    due = wanted > policy.compact_at * budget
    if memory_window is not None and raw_count > memory_window:
        due = True
    if not due:
        return None
    after = record.last_seq if record is not None else None
    # The run after the record (a unit reaching past it is read whole): the new record
    # folds the old one, so its coverage stays contiguous and every seq in it was read.
    span = [u for u in candidates if after is None or u.last > after]
    kept_messages = 0
    cut = len(span)
    while cut > 0 and kept_messages < policy.keep_recent:
        cut -= 1
        kept_messages += len(span[cut].seqs)
    chosen: list[Unit] = []
    read = 0
    for unit in span[:cut]:
        if chosen and read + unit.tokens > budget:
            break
        chosen.append(unit)
        read += unit.tokens
    if not chosen:
        return None
    return CompactionPlan(record, tuple(chosen))
