"""The newest messages of each key's current thread, kept in memory between turns.

Without it every turn re-reads and re-decodes its whole context window from the store
(about a quarter of the gateway's own CPU per turn at a 50-message window, and a
round trip per turn on a network database). An entry is used only while the store's
own fresh view of the latest segment agrees with it: the same segment id, the same
in-place clear mark and the same message count the entry last saw. A rotation, a
revert, a clear, or a message appended by another gateway process changes one of
those, and the next turn reloads. Erasure and import drop the key's entry explicitly,
since they can bring back a session id with other content; with PostgreSQL, other
processes hear of those through LISTEN/NOTIFY (store/postgres/events.py).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, Segment


@dataclass(slots=True)
class _Entry:
    session_id: str
    cleared_after_seq: int
    #: The segment's message count (its last seq) when the entry was last brought up to date.
    message_count: int
    #: The thread's newest messages, oldest first; at most `capacity` of them.
    messages: list[Message]
    capacity: int
    #: True when `messages` is the whole thread, so any smaller or larger window is served.
    whole: bool

    def matches(self, segment: Segment) -> bool:
        return (
            self.session_id == segment.session_id
            and self.cleared_after_seq == segment.cleared_after_seq
            and self.message_count == segment.message_count
        )


class ThreadCache:
    """An LRU of thread tails by session key. Not shared between processes."""

    def __init__(self, max_keys: int = 2048) -> None:
        if max_keys < 0:
            raise ValueError("max_keys must be >= 0")
        self.max_keys = max_keys
        self._entries: OrderedDict[KeyRef, _Entry] = OrderedDict()
        self.hits = 0
        self.misses = 0

    def get(self, key: KeyRef, segment: Segment, limit: int) -> list[Message] | None:
        """The newest `limit` messages of `segment`'s thread, oldest first, or None."""
        entry = self._entries.get(key)
        if entry is None or not entry.matches(segment):
            self.misses += 1
            return None
        if len(entry.messages) < limit and not entry.whole:
            self.misses += 1
            return None
        self.hits += 1
        self._entries.move_to_end(key)
        return entry.messages[-limit:] if limit > 0 else []

    def put(self, key: KeyRef, segment: Segment, limit: int, messages: list[Message]) -> None:
        """Record what the store answered to `thread_tail(segment, limit)`."""
        if self.max_keys == 0 or limit <= 0:
            return
        self._entries[key] = _Entry(
            segment.session_id,
            segment.cleared_after_seq,
            segment.message_count,
            list(messages),
            capacity=limit,
            whole=len(messages) < limit,
        )
        self._entries.move_to_end(key)
        while len(self._entries) > self.max_keys:
            self._entries.popitem(last=False)

    def appended(self, key: KeyRef, message: Message) -> None:
        """Note a message just appended to the key's latest segment."""
        entry = self._entries.get(key)
        if entry is None:
            return
        if entry.session_id != message.session_id or message.seq != entry.message_count + 1:
            # Not the next message of the cached segment: something else wrote in between.
            del self._entries[key]
            return
        entry.messages.append(message)
        entry.message_count = message.seq
        if len(entry.messages) > entry.capacity:
            del entry.messages[0]
            entry.whole = False

    def drop(self, key: KeyRef) -> None:
        self._entries.pop(key, None)

    def clear(self) -> None:
        self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)
