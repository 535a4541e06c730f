"""Carry-over at rotation (DESIGN.md §12, docs/working_set.md#carry-over): with an agent's
`[agents.X.context] carry_over = "summary"`, a segment that a rotation for idle time, a
day boundary or a new topic made starts its context with a summary of the previous
segment. Off by default: seed 003 D1 (a new segment starts empty) holds.

The summary is a compaction record of the previous segment covering all of it (the
compactor folds what that segment already had summarised), written by the summary model
when the rotation happens, so only the rotating turn can wait for it (at most
`WAIT_SECONDS`; past that it goes on without, and later turns find it). A turn that waits
says so: a `compaction` event with `carried_from` (the previous segment), status `waited`
(the summary is in its context), `failed` (nothing carried over) or `pending` (it stopped
waiting; the summary is still being written). Every turn of the new segment then gets it
as a recalled fragment with its rationale: recorded in the user message's `recall`
metadata like an explicit recall, and sent as its own system message, "Summary of the
previous conversation (carried over at rotation: …)" (left out first when the budget is
short, as recall is)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from dataclasses import replace

from sessiongate.core.events import CompactionEvent
from sessiongate.core.segments import RecallFragment, Role, RotationReason, RotationRecord, Segment
from sessiongate.service.agents import AgentProfile
from sessiongate.service.compaction import Compactor, compaction_event
from sessiongate.store.base import Store

log = logging.getLogger(__name__)

#: Rotations whose new segment carries the previous one over (not `/new`, a revert, a
#: fork: the user asked for those).
CARRIED = frozenset({RotationReason.IDLE, RotationReason.DAY_BOUNDARY, RotationReason.SEMANTIC})
#: The longest the rotating turn waits for the summary.
WAIT_SECONDS = 15.0
#: Compactions one carry-over may take to cover a long segment (each reads one budget).
MAX_PASSES = 4


def carried_from(segment: Segment) -> str | None:
    """The previous segment a rotation-made segment carries over, or None."""
    if segment.created_reason not in CARRIED or not segment.parent_ids:
        return None
    return segment.parent_ids[-1]


def rationale(segment: Segment, last_seq: int) -> str:
    reason = segment.created_reason.value if segment.created_reason else "rotation"
    return (
        f"carry-over: a summary of the previous segment (messages #1 to #{last_seq}),"
        f" made when it rotated ({reason})"
    )


def pending(previous: str) -> CompactionEvent:
    """What a turn that stopped waiting for the carried-over summary announces."""
    return CompactionEvent(None, {}, 0, 0, None, "pending", carried_from=previous)


class CarryOver:
    def __init__(self, compactor: Compactor, store: Store) -> None:
        self.compactor = compactor
        self.store = store
        self._running: dict[str, asyncio.Task[CompactionEvent | None]] = {}

    async def fragments(
        self,
        agent: AgentProfile,
        segment: Segment,
        rotations: list[RotationRecord],
        announce: Callable[[CompactionEvent], None] | None = None,
    ) -> list[RecallFragment]:
        """The carried-over summary for a turn of `segment` (none unless the agent asks
        for it and the segment was made by a carried rotation). A turn that rotated into
        the segment starts the summary and waits for it, bounded, and tells `announce`
        how the wait went (nothing when the summary was there already)."""
        if agent.working_set.carry_over != "summary" or not self.compactor.enabled:
            return []
        previous = carried_from(segment)
        if previous is None or agent.context_budget is None:
            return []
        if any(r.to_session_id == segment.session_id for r in rotations):
            task = self._start(agent, previous)
            done, _ = await asyncio.wait({task}, timeout=WAIT_SECONDS)
            waited = task.result() if done else pending(previous)
            if not done:
                log.info("carry-over of %s not ready: the turn goes on without it", previous)
            if waited is not None and announce is not None:
                announce(waited)
        record = await self.compactor.current(previous)
        if record is None:  # not made yet here: perhaps by another process
            record = await self.compactor.current(previous, fresh=True)
        if record is None:
            return []
        return [
            RecallFragment(
                session_id=previous,
                message_id=f"{previous}:{record.last_seq}",
                seq=record.last_seq,
                role=Role.SYSTEM,
                content=record.summary,
                score=1.0,
                rationale=rationale(segment, record.last_seq),
                created_at=record.created_at,
                carried_over=segment.created_reason.value if segment.created_reason else None,
            )
        ]

    def _start(self, agent: AgentProfile, previous: str) -> asyncio.Task[CompactionEvent | None]:
        task = self._running.get(previous)
        if task is None:
            task = asyncio.get_running_loop().create_task(self._summarise(agent, previous))
            self._running[previous] = task
            task.add_done_callback(lambda _: self._running.pop(previous, None))
        return task

    async def _summarise(self, agent: AgentProfile, previous: str) -> CompactionEvent | None:
        """Compact the previous segment until one record covers all of it; the event a
        turn that waited for it announces (None: it was covered already)."""
        made = None
        try:
            segment = await self.store.get_segment(previous)
            if segment is None or agent.context_budget is None:
                return None
            whole = replace(agent, working_set=replace(agent.working_set, keep_recent=0))
            for _ in range(MAX_PASSES):
                record = await self.compactor.current(previous)
                if record is not None and record.last_seq >= segment.message_count:
                    break
                # (compact reads the records afresh: another process may have made it.)
                record_made = await self.compactor.compact(
                    previous,
                    whole,
                    agent.context_budget,
                    instructions="This segment has ended: summarise it so the next one can"
                    " continue where it left off.",
                    start_after=segment.cleared_after_seq,
                )
                if record_made is None:
                    break
                made = record_made
        except Exception as exc:
            log.warning("carry-over of %s failed: %s", previous, type(exc).__name__)
            return CompactionEvent(None, {}, 0, 0, None, "failed", carried_from=previous)
        finally:
            self.compactor.news(previous)  # announced (below) by the turn that waits
        return None if made is None else compaction_event(made, "waited", carried_from=previous)

    async def aclose(self) -> None:
        for task in list(self._running.values()):
            task.cancel()
        for task in list(self._running.values()):
            with contextlib.suppress(BaseException):
                await task
