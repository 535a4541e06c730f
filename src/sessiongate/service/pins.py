"""Pins of the working set (DESIGN.md §12, docs/working_set.md): a pinned message stays
raw in every context of its segment — never covered by a summary, trimmed only after
every unpinned message — even once it is older than the agent's window. Pins are read
once per segment and process, and only when a turn's thread needs fitting (the common
short thread reads none); this process's own pins and unpins keep the copy current.

Only a user's or assistant's text message can be pinned: a tool step is sent whole or
not at all, and its assistant message is kept with its results by the selection rule."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from sessiongate.core.clock import Clock
from sessiongate.core.context import MESSAGE_OVERHEAD_TOKENS, estimate_tokens
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, Role
from sessiongate.errors import Conflict, InvalidInput
from sessiongate.store.pins import PinStore

#: The segments whose pins one process keeps in memory (the least recently used go).
MAX_CACHED_SEGMENTS = 4096


class PinsExceedBudget(Conflict):
    code = "pins_exceed_budget"


def pin_store(store: object) -> PinStore | None:
    """The pins beside the session store's (same connection or pool); None for a store
    that keeps none."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.pins import SQLitePinStore

        return SQLitePinStore(store)
    from sessiongate.store.postgres.store import PostgresStore

    if isinstance(store, PostgresStore):
        from sessiongate.store.postgres.pins import PostgresPinStore

        return PostgresPinStore(store)
    return None


def pinnable(message: Message) -> bool:
    if message.role is Role.USER:
        return True
    return message.role is Role.ASSISTANT and "tool_calls" not in message.metadata


def pins_tokens(messages: Sequence[Message]) -> int:
    """What the pinned messages cost in a context (estimated, uncorrected)."""
    return sum(estimate_tokens(m.content) + MESSAGE_OVERHEAD_TOKENS for m in messages)


class PinBoard:
    def __init__(self, store: object, clock: Clock) -> None:
        self.rows = pin_store(store)
        self.clock = clock
        self._pinned: OrderedDict[str, tuple[Message, ...]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.rows is not None

    async def pinned(self, session_id: str) -> tuple[Message, ...]:
        """The segment's pinned messages, oldest first (one read per segment and process)."""
        found = self._pinned.get(session_id)
        if found is None and self.rows is not None:
            found = tuple(await self.rows.pinned(session_id))
        if found is None:
            return ()
        self._keep(session_id, found)
        return found

    def _keep(self, session_id: str, messages: tuple[Message, ...]) -> None:
        self._pinned[session_id] = messages
        self._pinned.move_to_end(session_id)
        while len(self._pinned) > MAX_CACHED_SEGMENTS:
            self._pinned.popitem(last=False)

    async def pin(self, message: Message, budget: int | None, ratio: float = 1.0) -> bool:
        """Pin `message` in its segment; whether it was not pinned already. Refused when
        the segment's pins, this one with them, would not fit `budget` alone (tokens, the
        estimate corrected by `ratio`), or when the message is not a text message."""
        if self.rows is None:
            raise Conflict("this store keeps no pins", code="pins_unavailable")
        if not pinnable(message):
            raise InvalidInput(
                "only a user's or assistant's text message can be pinned"
                " (a tool step is kept whole with its assistant message)",
                code="not_pinnable",
            )
        current = await self.pinned(message.session_id)
        if any(m.seq == message.seq for m in current):
            return False
        wanted = sorted((*current, message), key=lambda m: m.seq)
        cost = int(pins_tokens(wanted) * ratio)
        if budget is not None and cost > budget:
            raise PinsExceedBudget(
                f"the pinned messages would cost about {cost} tokens, more than the"
                f" {budget} the agent's model has for a context: unpin some first",
            )
        added = await self.rows.pin(message.session_id, message.seq, self.clock.now())
        self._keep(message.session_id, tuple(wanted))
        return added

    async def unpin(self, message: Message) -> bool:
        """Whether it was pinned."""
        if self.rows is None:
            return False
        current = await self.pinned(message.session_id)
        gone = await self.rows.unpin(message.session_id, message.seq)
        self._keep(message.session_id, tuple(m for m in current if m.seq != message.seq))
        return gone

    async def forget(self, _key: KeyRef) -> None:
        """After a key's erasure: none of its pinned texts stays in memory."""
        self._pinned.clear()
