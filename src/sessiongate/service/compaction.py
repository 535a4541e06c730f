"""Compactions of the working set (docs/working_set.md): the records of each segment
(read once per segment and process, and only once a thread is long enough to need them;
after that, a path that needs them asks the store in one small query whether another
process changed them), which segments are due, and the summariser that runs after a
turn, for the next one.

A compaction reads the summary in force and the oldest raw units after it (the segment's
own messages, unsafe and superseded ones left out), asks the summary model (the agent's
`summary_model`, else its control model, else its reply model) for one summary, and
stores a record that folds the one before. A summariser that fails or times out stores
nothing: the raw messages are untouched, the next turn trims (announced) and a later
turn tries again (after consecutive failures, not on every turn: `MAX_BACKOFF_TURNS`).
So does a summary no shorter than what it read (a small model may
write a letter where a summary was asked): keeping it would cost more of the budget
than the messages it stands for. Each new record, or failure, is announced by the next
turn's `compaction` event. A summary request whose provider reports its prompt tokens
corrects the model's estimate as a turn's does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from sessiongate.core.clock import Clock
from sessiongate.core.context import MESSAGE_OVERHEAD_TOKENS, estimate_tokens, without_superseded
from sessiongate.core.events import CompactionEvent
from sessiongate.core.ids import IdGenerator
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, Segment
from sessiongate.core.summary_prompt import summary_request
from sessiongate.core.working_set import (
    CompactionRecord,
    in_force,
    render_summary,
    select,
)
from sessiongate.core.working_units import thread_units
from sessiongate.errors import NotFound
from sessiongate.models.base import ReplyModel, TextDelta, Usage
from sessiongate.service.agents import AgentProfile
from sessiongate.service.budgets import TokenCalibration
from sessiongate.service.pins import PinBoard
from sessiongate.store.base import Store
from sessiongate.store.compactions import CompactionStore, Stamp, stamp_of

log = logging.getLogger(__name__)

#: The longest one summary may take.
SUMMARY_TIMEOUT_SECONDS = 120.0
#: The most messages one compaction reads (the oldest after the summary in force).
MAX_READ_MESSAGES = 400
#: What the summariser's instructions cost (estimated), beside what it reads.
PROMPT_TOKENS = 200
#: The segments whose records one process keeps in memory (the least recently used go).
MAX_CACHED_SEGMENTS = 4096
#: How long a turn that would otherwise trim waits for a compaction already running.
WAIT_SECONDS = 60.0
#: After consecutive failed (or refused) summaries of a segment, the turns that pass
#: before the next attempt: 0 after the first, then 1, 3, 7, at most this many. A model
#: that cannot summarise is not asked again on every turn (a local model's time is the
#: user's); the turns in between trim, announced, as after any failure.
MAX_BACKOFF_TURNS = 15


#: Told (segment id, agent, the messages about to be summarised) before a summary.
BeforeSummary = Callable[[str, AgentProfile, list[Message]], None]
#: Told of each compaction stored (`done`), reverted (`reverted`) or failed (`failed`, no
#: record) with the segment's id: the `session.compacted` hook and the metric. Must not
#: block (a listener with work to do schedules it).
CompactionListener = Callable[[str, CompactionRecord | None, str], None]


class SummaryNotShorter(ValueError):
    """The summary model's answer was no shorter than the span it summarised."""


@dataclass(frozen=True, slots=True)
class Due:
    agent: AgentProfile
    budget: int
    #: A legacy in-place clear: the context starts after this seq.
    start_after: int = 0


def compaction_store(store: object) -> CompactionStore | None:
    """The records beside the session store's (same connection or pool); None for a
    store that keeps none."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.compactions import SQLiteCompactionStore

        return SQLiteCompactionStore(store)
    from sessiongate.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        from sessiongate.store.postgres.compactions import PostgresCompactionStore

        return PostgresCompactionStore(store)
    return None


def compaction_event(
    record: CompactionRecord, status: str, *, carried_from: str | None = None
) -> CompactionEvent:
    return CompactionEvent(
        record.compaction_id,
        {"first_seq": record.first_seq, "last_seq": record.last_seq, "count": record.count},
        record.tokens_before,
        record.tokens_after,
        record.model,
        status,
        carried_from,
    )


@dataclass(frozen=True, slots=True)
class HeldRecords:
    """A segment's records as this process holds them, with what every turn of a long
    thread asks of them worked out once (a segment may hold thousands of records)."""

    records: tuple[CompactionRecord, ...]
    current: CompactionRecord | None
    stamp: Stamp

    @classmethod
    def of(cls, records: tuple[CompactionRecord, ...]) -> HeldRecords:
        return cls(records, in_force(records), stamp_of(records))


class Compactor:
    def __init__(
        self,
        store: Store,
        models: Mapping[str, ReplyModel],
        clock: Clock,
        calibration: TokenCalibration | None = None,
    ) -> None:
        self._session_store = store
        #: The per-model correction of the estimate: a summary request fits its window.
        self.calibration = calibration
        self.rows = compaction_store(store)
        #: The segments' pinned messages (kept raw in every context of their segment).
        self.pins = PinBoard(store, clock)
        self.models = models
        self.ids = IdGenerator(clock)
        self.clock = clock
        #: Per segment, most recently used last; at most MAX_CACHED_SEGMENTS.
        self._records: OrderedDict[str, HeldRecords] = OrderedDict()
        self._due: dict[str, Due] = {}
        self._running: dict[str, asyncio.Task[None]] = {}
        self._news: dict[str, list[CompactionEvent]] = {}
        #: Per segment: consecutive failed summaries, and the due turns still to skip.
        self._failures: dict[str, int] = {}
        self._backoff: dict[str, int] = {}
        #: Told the span each compaction is about to summarise, before the summary is
        #: asked for (memory extraction: service/memory_extraction.py); must not block.
        self.before_summary: BeforeSummary | None = None
        self._listeners: list[CompactionListener] = []

    def on_compaction(self, listener: CompactionListener) -> None:
        self._listeners.append(listener)

    def tell(self, session_id: str, record: CompactionRecord | None, status: str) -> None:
        for listener in self._listeners:
            try:
                listener(session_id, record, status)
            except Exception:
                log.exception("a compaction listener failed")

    @property
    def enabled(self) -> bool:
        return self.rows is not None

    async def records(
        self, session_id: str, *, fresh: bool = False
    ) -> tuple[CompactionRecord, ...]:
        """The segment's records (one read per segment and process; this process's own
        compactions keep it current). `fresh`: first ask the store whether another
        process added or reverted one since (one small query; read again if so) — for
        a path that reads them anyway (a thread past `compact_at` or the window, a
        compaction about to be planned), never for the common short thread."""
        held = await self._held(session_id, fresh=fresh)
        return held.records if held is not None else ()

    async def current(self, session_id: str, *, fresh: bool = False) -> CompactionRecord | None:
        """The segment's record in force (core/working_set.py `in_force`), worked out once
        per change instead of by a scan of every record on every turn."""
        held = await self._held(session_id, fresh=fresh)
        return held.current if held is not None else None

    async def _held(self, session_id: str, *, fresh: bool) -> HeldRecords | None:
        held = self._records.get(session_id)
        rows = self.rows
        if held is not None and fresh and rows is not None:
            held = held if await rows.stamp(session_id) == held.stamp else None
        if held is None and rows is not None:
            held = HeldRecords.of(tuple(await rows.for_segment(session_id)))
        if held is not None:
            self._records[session_id] = held
            self._records.move_to_end(session_id)
            while len(self._records) > MAX_CACHED_SEGMENTS:
                self._records.popitem(last=False)
        return held

    def _keep(self, session_id: str, records: tuple[CompactionRecord, ...]) -> None:
        self._records[session_id] = HeldRecords.of(records)
        self._records.move_to_end(session_id)
        while len(self._records) > MAX_CACHED_SEGMENTS:
            self._records.popitem(last=False)

    async def forget(self, _key: KeyRef) -> None:
        """After a key's erasure: none of its summaries stays in memory (erasures are
        rare; the other segments' records are read again when needed; pending
        announcements hold no text and stay)."""
        self._records.clear()
        self._failures.clear()
        self._backoff.clear()
        await self.pins.forget(_key)

    def cached(self, session_id: str) -> tuple[CompactionRecord, ...]:
        """The records this process already holds for the segment (no read)."""
        held = self._records.get(session_id)
        return held.records if held is not None else ()

    async def revert(self, session_id: str, compaction_id: str) -> CompactionRecord:
        """Put a record's span back to raw (the record before it is in force again; a
        later turn compacts again if it must). NotFound unless it is the segment's."""
        records = await self.records(session_id, fresh=True)
        found = next((r for r in records if r.compaction_id == compaction_id), None)
        if found is None or self.rows is None:
            raise NotFound("no such compaction in this session", code="compaction_not_found")
        if not found.reverted:
            await self.rows.set_reverted(compaction_id, True)
        reverted = replace(found, reverted=True)
        self._keep(session_id, tuple(reverted if r is found else r for r in records))
        if not found.reverted:
            self.tell(session_id, reverted, "reverted")
        return reverted

    def mark_due(
        self, session_id: str, agent: AgentProfile, budget: int, start_after: int = 0
    ) -> None:
        self._due[session_id] = Due(agent, budget, start_after)

    def news(self, session_id: str) -> list[CompactionEvent]:
        """Compactions (and failures) not announced yet; announced once."""
        return self._news.pop(session_id, [])

    def mark_waited(self, session_id: str) -> None:
        """The compactions about to be announced held up the turn: say so (`waited`)."""
        self._news[session_id] = [
            replace(e, status="waited") if e.status == "done" else e
            for e in self._news.get(session_id, [])
        ]

    def running(self, session_id: str) -> bool:
        task = self._running.get(session_id)
        return task is not None and not task.done()

    async def wait(self, session_id: str) -> bool:
        """Wait (bounded) for the segment's running compaction; whether one finished."""
        task = self._running.get(session_id)
        if task is None:
            return False
        done, _ = await asyncio.wait({task}, timeout=WAIT_SECONDS)
        return bool(done)

    def after_turn(self, session_id: str) -> None:
        """Start the compaction a turn found due, in the background (one per segment)."""
        due = self._due.pop(session_id, None)
        if due is None or self.rows is None or self.running(session_id):
            return
        if self._backoff.get(session_id, 0) > 0:  # after failures: not on every turn
            self._backoff[session_id] -= 1
            return
        task = asyncio.create_task(self._run(session_id, due))
        self._running[session_id] = task
        task.add_done_callback(lambda _: self._running.pop(session_id, None))

    async def aclose(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(BaseException):  # cancelled or failed: nothing kept
                await task

    async def _run(self, session_id: str, due: Due) -> None:
        try:
            await self.compact(session_id, due.agent, due.budget, start_after=due.start_after)
        except Exception as exc:
            failures = self._failures.pop(session_id, 0) + 1
            self._failures[session_id] = failures  # newest last: the oldest go first
            while len(self._failures) > MAX_CACHED_SEGMENTS:
                self._backoff.pop(next(iter(self._failures)), None)
                self._failures.pop(next(iter(self._failures)))
            self._backoff[session_id] = min(2 ** (failures - 1) - 1, MAX_BACKOFF_TURNS)
            log.warning(
                "compaction of %s failed: %s (%d in a row)",
                session_id,
                type(exc).__name__,
                failures,
            )
            failed = CompactionEvent(None, {}, 0, 0, None, "failed")
            self._news.setdefault(session_id, []).append(failed)
            self.tell(session_id, None, "failed")
            return
        self._failures.pop(session_id, None)
        self._backoff.pop(session_id, None)

    async def compact(
        self,
        session_id: str,
        agent: AgentProfile,
        budget: int,
        *,
        instructions: str | None = None,
        start_after: int = 0,
    ) -> CompactionRecord | None:
        """One compaction of the segment now; None when there is nothing to compact."""
        assert self.rows is not None
        from sessiongate.service.turn.safety_gate import leave_out_unsafe

        # Afresh: a record another process stored is folded, not summarised again.
        records = await self.records(session_id, fresh=True)
        previous = in_force(records)
        after = max(previous.last_seq if previous is not None else 0, start_after)
        messages = await self._session_store.list_messages(
            session_id, after_seq=after, limit=MAX_READ_MESSAGES
        )
        thread = without_superseded(leave_out_unsafe(list(messages)))
        units = thread_units(
            thread, max_result_chars=agent.max_tool_result_chars, count_tokens=estimate_tokens
        )
        policy = replace(agent.working_set, compact_at=0.0)  # due: the turn said so
        # The summariser reads at most three quarters of the budget, less the summary it
        # folds and its instructions, corrected as a turn's context is (the reserve is
        # kept for its answer).
        name = agent.working_set.summary_model or agent.control_model or agent.reply_model
        budget = min(budget, agent.summary_budget or budget)
        ratio = self.calibration.ratio(name) if self.calibration is not None else 1.0
        folded = estimate_tokens(previous.summary) if previous is not None else 0
        working = select(
            [u.unit for u in units],
            compactions=records,
            budget=max(int(budget * 3 // 4 / ratio) - folded - PROMPT_TOKENS, 1),
            summary_tokens=lambda r: estimate_tokens(render_summary(r)),
            policy=policy,
        )
        plan = working.next_compaction
        if plan is None:
            return None
        chosen = set(plan.units)
        if self.before_summary is not None:
            read = set(plan.read_seqs)
            try:
                self.before_summary(session_id, agent, [m for m in thread if m.seq in read])
            except Exception:  # what listens never stops a compaction
                log.exception("the listener before the compaction of %s failed", session_id)
        seq_of = {m.message_id: m.seq for m in thread}
        items = [
            (seq_of.get(item.source, u.unit.first), item)
            for u in units
            if u.unit in chosen
            for item in u.items
        ]
        wire = summary_request(
            previous.summary if previous is not None else None,
            items,
            instructions=instructions,
        )
        summary = (await asyncio.wait_for(self._ask(name, wire), SUMMARY_TIMEOUT_SECONDS)).strip()
        if not summary:
            raise ValueError("the summary model answered nothing")
        read_tokens = sum(u.tokens for u in plan.units)
        if previous is not None:
            read_tokens += estimate_tokens(previous.summary)
        if estimate_tokens(summary) >= read_tokens:
            raise SummaryNotShorter(
                f"a summary of {estimate_tokens(summary)} tokens for {read_tokens} read"
            )
        record = CompactionRecord(
            compaction_id=self.ids.new(),
            session_id=session_id,
            first_seq=plan.first_seq,
            last_seq=plan.last_seq,
            count=len(plan.read_seqs) + (previous.count if previous is not None else 0),
            summary=summary,
            model=name,
            tokens_before=read_tokens,
            tokens_after=estimate_tokens(summary),
            created_at=self.clock.now(),
            previous_compaction_id=previous.compaction_id if previous is not None else None,
            instructions=instructions,
        )
        await self.rows.add(record)
        self._keep(session_id, (*records, record))
        self._news.setdefault(session_id, []).append(compaction_event(record, "done"))
        self.tell(session_id, record, "done")
        return record

    async def _ask(self, name: str, wire: list[dict[str, object]]) -> str:
        model = self.models.get(name)
        if model is None:
            raise ValueError(f"summary model {name!r} is not configured")
        parts: list[str] = []
        async for chunk in model.stream(wire):
            if isinstance(chunk, TextDelta):
                parts.append(chunk.text)
            elif isinstance(chunk, Usage):
                self._observe(name, wire, chunk)
        return "".join(parts)

    def _observe(self, name: str, wire: list[dict[str, object]], usage: Usage) -> None:
        """The provider's count of the summary prompt against the estimate of it: the
        summaries correct the estimate too (a server whose turns stream no usage may
        still report it here, and they are the requests nearest the window)."""
        if self.calibration is None or usage.estimated or usage.prompt_tokens <= 0:
            return
        estimate = sum(
            estimate_tokens(str(message.get("content") or "")) + MESSAGE_OVERHEAD_TOKENS
            for message in wire
        )
        self.calibration.observe(name, estimated=estimate, reported=usage.prompt_tokens)


async def drain_compactions(compactor: Compactor) -> None:
    """Wait for every running compaction (graceful shutdown and tests)."""
    while running := [t for t in compactor._running.values() if not t.done()]:
        await asyncio.gather(*running, return_exceptions=True)


async def run_compact_command(
    compactor: Compactor,
    agent: AgentProfile,
    segment: Segment,
    instructions: str,
) -> CompactionEvent:
    """`/compact [instructions]` as a message: compact now; the event that says how it
    went (`done`, `nothing_to_compact`, `unavailable`, `failed`). Nothing is stored of
    the command itself."""
    budget = agent.context_budget
    if budget is None or agent.working_set.compaction == "off" or not compactor.enabled:
        return CompactionEvent(None, {}, 0, 0, None, "unavailable")
    session_id, start_after = segment.session_id, segment.cleared_after_seq
    try:
        record = await compactor.compact(
            session_id, agent, budget, instructions=instructions or None, start_after=start_after
        )
    except Exception as exc:
        log.warning("compaction of %s failed: %s", session_id, type(exc).__name__)
        compactor.tell(session_id, None, "failed")
        return CompactionEvent(None, {}, 0, 0, None, "failed")
    if record is None:
        return CompactionEvent(None, {}, 0, 0, None, "nothing_to_compact")
    compactor.news(session_id)  # announced now, not by the next turn
    return compaction_event(record, "done")
