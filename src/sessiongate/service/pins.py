"""Pins of the working set (DESIGN.md §12, docs/working_set.md): a pinned message stays
raw in every context of its segment — never covered by a summary, trimmed only after
every unpinned message — even once it is older than the agent's window. A process keeps
each segment's pins in memory, read only when a turn's thread needs fitting (the common
short thread reads none); this process's own pins and unpins keep the copy current, and
each time the pins are asked for, one small query (the segment's pin stamp,
store/pins.py) tells whether another process on the same database (another gateway)
pinned or unpinned since.

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
from sessiongate.store.pins import PinStamp, PinStore, stamp_after

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
        #: Each segment's pinned messages and the stamp they were read (or kept) at.
        self._pinned: OrderedDict[str, tuple[tuple[Message, ...], PinStamp]] = OrderedDict()

    @property
    def enabled(self) -> bool:
        return self.rows is not None

    async def pinned(self, session_id: str, *, fresh: bool = True) -> tuple[Message, ...]:
        """The segment's pinned messages, oldest first: read once per segment and process,
        then (`fresh`) one small query asks whether another process changed them since."""
        held = await self._held(session_id, fresh=fresh)
        return held[0] if held is not None else ()

    async def _held(
        self, session_id: str, *, fresh: bool = True
    ) -> tuple[tuple[Message, ...], PinStamp] | None:
        if self.rows is None:
            return None
        held = self._pinned.get(session_id)
        if held is None or fresh:
            # The stamp first: a change between the two reads makes the next check read
            # them again, never hides one.
            stamp = await self.rows.stamp(session_id)
            if held is None or held[1] != stamp:
                held = (tuple(await self.rows.pinned(session_id)), stamp)
        self._keep(session_id, *held)
        return held

    def _keep(self, session_id: str, messages: tuple[Message, ...], stamp: PinStamp) -> None:
        self._pinned[session_id] = (messages, stamp)
        self._pinned.move_to_end(session_id)
        while len(self._pinned) > MAX_CACHED_SEGMENTS:
            self._pinned.popitem(last=False)

    def _changed(
        self, session_id: str, messages: tuple[Message, ...], before: PinStamp, step: int
    ) -> None:
        """After this process's own pin (`step` 1) or unpin (-1): the copy it expects.
        Had another process changed the pins in between, the stamp will not match and the
        next read asks the store."""
        self._keep(session_id, messages, stamp_after(before, step))

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
        held = await self._held(message.session_id)
        current, stamp = held if held is not None else ((), (0, 0))
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
        if added:
            self._changed(message.session_id, tuple(wanted), stamp, 1)
        else:  # another process pinned it just now: read afresh next time
            self._pinned.pop(message.session_id, None)
        return added

    async def unpin(self, message: Message) -> bool:
        """Whether it was pinned."""
        if self.rows is None:
            return False
        held = await self._held(message.session_id)
        current, stamp = held if held is not None else ((), (0, 0))
        gone = await self.rows.unpin(message.session_id, message.seq)
        if gone:
            kept = tuple(m for m in current if m.seq != message.seq)
            self._changed(message.session_id, kept, stamp, -1)
        else:
            self._pinned.pop(message.session_id, None)
        return gone

    async def forget(self, _key: KeyRef) -> None:
        """After a key's erasure: none of its pinned texts stays in memory."""
        self._pinned.clear()
