"""The CompactionStore protocol: the working set's compaction records, kept beside a
segment's raw messages (core/working_set.py's CompactionRecord), erased with it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sessiongate.core.working_set import CompactionRecord

COLUMNS = (
    "compaction_id, session_id, first_seq, last_seq, count, summary, model, tokens_before, "
    "tokens_after, created_at, previous_compaction_id, instructions, reverted"
)


#: What changes when a segment's records change, however few of them a process holds:
#: how many there are, and how many are reverted (records are added and reverted, never
#: edited otherwise).
Stamp = tuple[int, int]


def stamp_of(records: Sequence[CompactionRecord]) -> Stamp:
    return (len(records), sum(1 for r in records if r.reverted))


def compaction_values(
    record: CompactionRecord, to_time: Callable[[datetime], Any]
) -> tuple[Any, ...]:
    """The record as the values of `COLUMNS`, in order (what `compaction_from_row` reads
    back); `to_time` writes the store's time."""
    return (
        record.compaction_id,
        record.session_id,
        record.first_seq,
        record.last_seq,
        record.count,
        record.summary,
        record.model,
        record.tokens_before,
        record.tokens_after,
        to_time(record.created_at),
        record.previous_compaction_id,
        record.instructions,
        record.reverted,
    )


def compaction_from_row(row: Any, to_time: Callable[[Any], datetime]) -> CompactionRecord:
    """A row of `COLUMNS`; `to_time` reads the store's stored time."""
    return CompactionRecord(
        compaction_id=row[0],
        session_id=row[1],
        first_seq=int(row[2]),
        last_seq=int(row[3]),
        count=int(row[4]),
        summary=row[5],
        model=row[6],
        tokens_before=int(row[7]),
        tokens_after=int(row[8]),
        created_at=to_time(row[9]),
        previous_compaction_id=row[10],
        instructions=row[11],
        reverted=bool(row[12]),
    )


class CompactionStore(Protocol):
    async def add(self, record: CompactionRecord) -> None: ...

    async def for_segment(self, session_id: str) -> list[CompactionRecord]:
        """The segment's records, oldest first (reverted ones included)."""
        ...

    async def set_reverted(self, compaction_id: str, reverted: bool) -> bool:
        """Whether the record exists."""
        ...

    async def stamp(self, session_id: str) -> Stamp:
        """`stamp_of` the segment's records, counted by the database (one small query):
        whether another process changed them since this one read them."""
        ...
