"""The working set applied to one turn's context (docs/working_set.md): the context as
core/context.py assembles it from the agent's window, then cut to the budget of the
agent's models by core/working_set.py's rule — tool steps whole, the newest message
always, the oldest first, whatever goes counted so the turn announces it
(`context_trimmed`). The estimate is corrected by the ratio learnt per model from the
prompt tokens providers report (service/budgets.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import replace

from sessiongate.core.context import (
    MESSAGE_OVERHEAD_TOKENS,
    RECALLED_SOURCES,
    AssembledContext,
    estimate_tokens,
)
from sessiongate.core.events import ContextTrimmedEvent
from sessiongate.core.segments import Message, Segment
from sessiongate.core.tool_calls import ThreadItem
from sessiongate.core.working_set import (
    CompactionRecord,
    WorkingSet,
    WorkingSetPolicy,
    render_summary,
    select,
)
from sessiongate.core.working_units import thread_units
from sessiongate.errors import ModelError
from sessiongate.models.retry import CONTEXT_OVERFLOW
from sessiongate.service.agents import AgentProfile
from sessiongate.service.compaction import Compactor
from sessiongate.service.turn.handle import TurnHandle


def uses_working_set(
    policy: WorkingSetPolicy, token_budget: int | None, budget: int | None
) -> bool:
    """Whether the agent's context is cut to its models' budget: compaction on, no
    explicit `token_budget` (which keeps today's rule), a model with a window."""
    return policy.compaction == "auto" and token_budget is None and budget is not None


def fit_context(
    full: AssembledContext,
    thread: Sequence[Message],
    *,
    budget: int,
    ratio: float,
    policy: WorkingSetPolicy,
    memory_window: int,
    max_tool_result_chars: int,
    compactions: Sequence[CompactionRecord] = (),
    pinned: Collection[int] = (),
) -> tuple[AssembledContext, WorkingSet]:
    """`full` (assembled without a budget from `thread`) within `budget` tokens;
    `pinned`: the seqs the rule keeps raw."""
    estimated_budget = max(int(budget / ratio), 1)
    in_context = {m.source for m in full.messages}
    windowed = [m for m in thread if m.message_id in in_context]
    thread_ids = {m.message_id for m in thread}
    fixed = [
        m
        for m in full.messages
        if m.source not in thread_ids and not m.source.startswith("repair:")
    ]

    def cost(text: str) -> int:
        return estimate_tokens(text) + MESSAGE_OVERHEAD_TOKENS

    units = thread_units(
        windowed,
        max_result_chars=max_tool_result_chars,
        count_tokens=estimate_tokens,
        pinned=pinned,
    )
    if not units:
        return full, select([], budget=estimated_budget)
    fixed_tokens = sum(cost(m.content) for m in fixed)
    if fixed_tokens + units[-1].unit.tokens > estimated_budget and full.recall:
        # The recalled fragments (and a carried-over summary) go first when the newest
        # message would not fit.
        fixed = [m for m in fixed if m.source not in RECALLED_SOURCES]
        fixed_tokens = sum(cost(m.content) for m in fixed)
        full = replace(full, recall=())
    working = select(
        [u.unit for u in units],
        compactions=compactions,
        budget=estimated_budget,
        fixed_tokens=fixed_tokens,
        summary_tokens=lambda record: cost(render_summary(record)),
        policy=policy,
        memory_window=memory_window,
    )
    items = {u.unit: u.items for u in units}
    messages: list[ThreadItem] = list(fixed)
    if working.summary is not None:
        source = f"compaction:{working.summary.compaction_id}"
        messages.append(ThreadItem("system", render_summary(working.summary), source))
    for unit in working.raw:
        messages.extend(items[unit])
    return (
        replace(
            full,
            messages=tuple(messages),
            token_estimate=working.tokens,
            dropped_messages=len(working.trimmed),
        ),
        working,
    )


#: The second try after a context-overflow answer assumes the estimate was off by at
#: least this much (the budget halves).
OVERFLOW_SCALE = 2.0


async def reply_within_window(
    reply: Callable[[AssembledContext], Awaitable[None]],
    refit: Callable[[float], Awaitable[AssembledContext]],
    context: AssembledContext,
    handle: TurnHandle,
    *,
    fitted: bool,
) -> AssembledContext:
    """Run the reply; when the provider refuses it for passing its window before any text
    (`context_overflow`) and the context was fitted to a budget, retry once with the
    budget halved, announced (`context_trimmed`, reason `overflow`). Returns the context
    the reply was written from."""
    try:
        await reply(context)
        return context
    except ModelError as exc:
        if exc.code != CONTEXT_OVERFLOW or not fitted:
            raise
    smaller = await refit(OVERFLOW_SCALE)
    handle.emit(ContextTrimmedEvent(smaller.dropped_messages, "overflow"))
    await reply(smaller)
    return smaller


async def fit_turn_context(
    context: AssembledContext,
    thread: Sequence[Message],
    *,
    agent: AgentProfile,
    segment: Segment,
    budget: int,
    ratio: float,
    compactor: Compactor | None,
) -> AssembledContext:
    """`context` within the agent's budget, with the summary in force when the thread
    needs one. The common short thread costs no read: compaction records are read only
    when the thread passes `compact_at` of the budget, or the segment holds messages
    older than the window. Messages older than the window that no summary covers are
    counted as trimmed (announced). A compaction found due is marked for after the turn;
    a turn that would trim while one runs waits for it (bounded)."""

    def fit(records: Sequence[CompactionRecord]) -> tuple[AssembledContext, WorkingSet]:
        return fit_context(
            context,
            thread,
            budget=budget,
            ratio=ratio,
            policy=agent.working_set,
            memory_window=agent.memory_window,
            max_tool_result_chars=agent.max_tool_result_chars,
            compactions=records,
            pinned=pinned,
        )

    own = [m.seq for m in thread if m.session_id == segment.session_id]
    # The segment's own messages before the window (after a legacy in-place clear).
    older = max(min(own) - 1 - segment.cleared_after_seq, 0) if own else 0
    due_at = agent.working_set.compact_at * budget / ratio
    known = compactor is not None and bool(compactor.cached(segment.session_id))
    if not older and context.token_estimate <= due_at and not known:
        return context  # the common case: it fits, nothing to do, nothing read
    pinned: set[int] = set()
    extra = 0
    if compactor is not None and compactor.pins.enabled:
        pins = await compactor.pins.pinned(segment.session_id)
        if pins:
            context, thread, extra = with_pins(context, thread, pins)
            pinned = {m.seq for m in pins}
    fitted, working = fit(())
    if compactor is None or not compactor.enabled:
        return replace(fitted, dropped_messages=fitted.dropped_messages + older)
    if working.next_compaction is None and not working.trimmed and older == 0 and not known:
        return fitted  # nothing to summarise, nothing read
    # Asked afresh (one small query): another gateway may have compacted it since.
    record = await compactor.current(segment.session_id, fresh=True)
    if working.trimmed and compactor.running(segment.session_id):
        if await compactor.wait(segment.session_id):
            compactor.mark_waited(segment.session_id)  # the turn says it waited
        record = await compactor.current(segment.session_id)
    if record is not None:  # only the record in force matters to the rule
        fitted, working = fit((record,))
    # Covered only while its summary is sent (over the budget it may go too: announced).
    sent = record is not None and working.summary is not None
    covered_to = max(
        record.last_seq if record is not None and sent else 0, segment.cleared_after_seq
    )
    uncovered = max(older + segment.cleared_after_seq - covered_to, 0)
    if extra:  # the pinned messages older than the window are in the context
        uncovered = max(uncovered - sum(1 for m in thread[:extra] if m.seq > covered_to), 0)
    if working.next_compaction is not None or uncovered:
        compactor.mark_due(segment.session_id, agent, budget, segment.cleared_after_seq)
    return replace(fitted, dropped_messages=fitted.dropped_messages + uncovered)


def with_pins(
    context: AssembledContext, thread: Sequence[Message], pins: Sequence[Message]
) -> tuple[AssembledContext, list[Message], int]:
    """The pinned messages older than the window put in the context and at the head of
    the thread (oldest first), and how many were added."""
    present = {m.message_id for m in thread}
    older = [m for m in pins if m.message_id not in present]
    if not older:
        return context, list(thread), 0
    items = tuple(ThreadItem(m.role.value, m.content, m.message_id) for m in older)
    return replace(context, messages=(*context.messages, *items)), [*older, *thread], len(older)
