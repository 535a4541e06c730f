"""The CompactionStore protocol: the working set's compaction records, kept beside a
segment's raw messages (core/working_set.py's CompactionRecord), erased with it."""

from __future__ import annotations

from typing import Protocol

from sessiongate.core.working_set import CompactionRecord

COLUMNS = (
    "compaction_id, session_id, first_seq, last_seq, count, summary, model, tokens_before, "
    "tokens_after, created_at, previous_compaction_id, instructions, reverted"
)


class CompactionStore(Protocol):
    async def add(self, record: CompactionRecord) -> None: ...

    async def for_segment(self, session_id: str) -> list[CompactionRecord]:
        """The segment's records, oldest first (reverted ones included)."""
        ...

    async def set_reverted(self, compaction_id: str, reverted: bool) -> bool:
        """Whether the record exists."""
        ...
