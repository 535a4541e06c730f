"""The working set's pure rule (issue 21, DESIGN.md §12), by property: no context passes
its budget, a tool step is never split, every message not sent raw is covered by the
summary sent (which read it) or announced as trimmed, a compaction cites only what it read.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiongate.core.context import estimate_tokens
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.core.tool_calls import to_wire
from sessiongate.core.working_set import (
    CompactionRecord,
    Unit,
    WorkingSetPolicy,
    in_force,
    select,
)
from sessiongate.core.working_units import thread_units

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SID = "seg"


def msg(seq: int, role: Role, content: str, **metadata: object) -> Message:
    return Message(SID, seq, role, content, MessageStatus.COMPLETE, T0, dict(metadata))


@st.composite
def threads(draw: st.DrawFn) -> list[Message]:
    """A thread of plain turns and tool steps, some cut short, some results orphaned."""
    out: list[Message] = []
    seq = 0

    def add(role: Role, content: str, **metadata: object) -> None:
        nonlocal seq
        seq += 1
        out.append(msg(seq, role, content, **metadata))

    for _ in range(draw(st.integers(1, 25))):
        add(Role.USER, "u" * draw(st.integers(0, 400)))
        if draw(st.booleans()):
            calls = draw(st.integers(1, 3))
            ids = [f"c{seq}-{k}" for k in range(calls)]
            add(
                Role.ASSISTANT,
                "",
                tool_calls=[{"id": i, "name": "t", "arguments": "{}"} for i in ids],
            )
            for call_id in ids:
                if draw(st.integers(0, 5)):  # sometimes cut short: no result
                    add(Role.TOOL, "r" * draw(st.integers(0, 600)), tool_call_id=call_id)
            if draw(st.integers(0, 8)) == 0:
                add(Role.TOOL, "orphan", tool_call_id="nobody")
        add(Role.ASSISTANT, "a" * draw(st.integers(0, 400)))
    return out


def record(first: int, last: int, *, cid: str = "c1", reverted: bool = False) -> CompactionRecord:
    return CompactionRecord(
        compaction_id=cid,
        session_id=SID,
        first_seq=first,
        last_seq=last,
        count=last - first + 1,
        summary="summary",
        model="m",
        tokens_before=0,
        tokens_after=0,
        created_at=T0,
        reverted=reverted,
    )


def summary_tokens(_: CompactionRecord) -> int:
    return 30


@settings(max_examples=300, deadline=None)
@given(
    threads(),
    st.integers(0, 6000),
    st.integers(0, 200),
    st.one_of(st.none(), st.integers(0, 60)),
    st.sets(st.integers(1, 80), max_size=4),
    st.integers(1, 12),
    st.integers(2, 100),
)
def test_selection_properties(
    thread: list[Message],
    budget: int,
    fixed: int,
    covered_to: int | None,
    pinned: set[int],
    keep_recent: int,
    memory_window: int,
) -> None:
    units = thread_units(thread, max_result_chars=200, count_tokens=estimate_tokens, pinned=pinned)
    compactions = [] if covered_to is None else [record(1, covered_to)]
    policy = WorkingSetPolicy(keep_recent=keep_recent)
    ws = select(
        [u.unit for u in units],
        compactions=compactions,
        budget=budget,
        fixed_tokens=fixed,
        summary_tokens=summary_tokens,
        policy=policy,
        memory_window=memory_window,
    )
    all_seqs = [s for u in units for s in u.unit.seqs]
    # Every seq of the thread is in exactly one unit.
    assert sorted(all_seqs) == sorted(set(all_seqs))
    assert set(all_seqs) == {m.seq for m in thread} or any(m.role is Role.TOOL for m in thread)

    # Budget: never passed, unless the newest unit alone (with the fixed text) passes it.
    newest = units[-1].unit
    if fixed + newest.tokens <= budget:
        assert ws.tokens <= budget
        assert not ws.over_budget
    assert ws.raw[-1] == newest  # the model always sees what it answers
    assert ws.tokens == fixed + sum(u.tokens for u in ws.raw) + (30 if ws.summary else 0)

    # Accounting: raw, covered by the summary sent, or trimmed (announced); nothing lost.
    raw = [s for u in ws.raw for s in u.seqs]
    assert sorted(raw + list(ws.covered) + list(ws.trimmed)) == sorted(all_seqs)
    if ws.covered:
        assert ws.summary is not None
        assert all(ws.summary.covers(s) for s in ws.covered)
    assert set(raw).isdisjoint(ws.trimmed)

    # Pairs never split: the raw units, flattened, are a valid tool conversation.
    by_unit = {u.unit: u.items for u in units}
    wire = [to_wire(i) for unit in ws.raw for i in by_unit[unit]]
    pending: set[str] = set()
    for message in wire:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending
            pending.discard(message["tool_call_id"])
        else:
            assert not pending, "a call without its result"
            pending = {c["id"] for c in message.get("tool_calls", [])}
    assert not pending

    # A planned compaction reads whole units, contiguous after the record in force, leaves
    # the newest keep_recent messages raw and cites exactly what it read (with the record).
    plan = ws.next_compaction
    if plan is not None:
        unit_seqs = {u.unit.seqs for u in units}
        assert all(u.seqs in unit_seqs for u in plan.units)
        read = set(plan.read_seqs)
        previous = plan.previous
        cited = {s for s in all_seqs if plan.first_seq <= s <= plan.last_seq}
        known = read | ({s for s in cited if previous.covers(s)} if previous else set())
        assert cited <= known
        after = [s for s in all_seqs if s > plan.last_seq]
        assert len(after) >= min(keep_recent, len(all_seqs))


def test_nothing_to_do_when_the_thread_fits() -> None:
    units = [Unit((1,), 10), Unit((2,), 10)]
    ws = select(units, budget=1000)
    assert ws.raw == tuple(units) and not ws.trimmed and ws.next_compaction is None


def test_over_budget_trims_the_oldest_and_plans_a_compaction() -> None:
    units = [Unit((i,), 100) for i in range(1, 21)]
    ws = select(units, budget=1000, policy=WorkingSetPolicy(keep_recent=4))
    assert ws.tokens <= 1000
    assert ws.trimmed == tuple(range(1, 11))
    plan = ws.next_compaction
    assert plan is not None and plan.previous is None
    assert (plan.first_seq, plan.last_seq) == (1, 10)  # one budget's worth read


def test_a_summary_replaces_what_it_covers_and_the_next_folds_it() -> None:
    units = [Unit((i,), 100) for i in range(1, 21)]
    first = record(1, 10)
    ws = select(
        units,
        compactions=[first],
        budget=1300,
        summary_tokens=summary_tokens,
        policy=WorkingSetPolicy(keep_recent=4),
    )
    assert ws.summary == first and ws.covered == tuple(range(1, 11))
    assert [u.first for u in ws.raw] == list(range(11, 21)) and not ws.trimmed
    plan = ws.next_compaction
    assert plan is not None and plan.previous == first
    assert (plan.first_seq, plan.last_seq) == (1, 16)


def test_a_reverted_compaction_is_not_in_force() -> None:
    older, newer = record(1, 5, cid="a"), record(1, 9, cid="b", reverted=True)
    assert in_force([older, newer]) == older
    assert in_force([newer]) is None


def test_off_plans_nothing_and_pins_stay_raw() -> None:
    units = [Unit((1,), 100, pinned=True), *(Unit((i,), 100) for i in range(2, 12))]
    ws = select(units, budget=600, policy=WorkingSetPolicy(compaction="off"))
    assert ws.next_compaction is None
    assert ws.raw[0].pinned and ws.tokens <= 600


def test_a_summary_of_what_is_older_than_the_window_is_still_sent() -> None:
    """The window's tail starts right after the record in force: no unit inside it, yet
    it stands for everything before the window (never a silent gap)."""
    units = [Unit((i,), 100) for i in range(9, 13)]
    ws = select(units, compactions=[record(1, 8)], budget=1000, summary_tokens=summary_tokens)
    assert ws.summary == record(1, 8) and ws.covered == () and not ws.trimmed
    assert ws.raw == tuple(units) and ws.tokens == 430
    # A record the window starts inside of, or none, changes nothing of that.
    assert select(units, budget=1000).summary is None
