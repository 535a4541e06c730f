"""What a streamed OpenAI-route answer can say in its headers (docs/api.md): the
compactions the turn announced before its reply started. The turn assembles its context
(and, when it must, waits for a running compaction) before the model is asked; the
response's headers wait for that point, never for the model, so the first token is not
delayed. A compaction the stream learns of later (none today: every `compaction` event
comes before the reply) is still in its `sessiongate_compaction` chunk."""

from __future__ import annotations

import asyncio

from sessiongate.core.events import CompactionEvent, MemoryEvent
from sessiongate.service.turn.handle import TurnHandle

#: The longest the headers wait for the context (a turn waits at most a minute for a
#: running compaction, service/compaction.py).
CONTEXT_WAIT_SECONDS = 90.0


async def announced_headers(handle: TurnHandle) -> dict[str, str]:
    """`X-Context-Compacted` once the turn's context is ready, when it announced any."""
    if not handle.context_ready.is_set() and not handle.closed and handle.task is not None:
        ready = asyncio.ensure_future(handle.context_ready.wait())
        try:
            await asyncio.wait({ready, handle.task}, timeout=CONTEXT_WAIT_SECONDS)
        finally:
            ready.cancel()
    compacted = [
        e.compaction_id
        for e in handle.journal
        if isinstance(e, CompactionEvent) and e.compaction_id is not None
    ]
    headers = {"X-Context-Compacted": ",".join(compacted)} if compacted else {}
    # Memory extraction's changes announced by this turn (docs/memory.md), likewise.
    remembered = [
        str(change["memory_id"])
        for e in handle.journal
        if isinstance(e, MemoryEvent)
        for change in e.changes
    ]
    if remembered:
        headers["X-Memory-Changed"] = ",".join(remembered)
    return headers
