"""The turns of this process that a client may read again after a dropped connection.

Every turn `TurnService.start_turn` creates is registered here with its owner. While it
runs, followers read its handle's own journal (`TurnHandle.follow`). Once it ends, its
events are kept in a compact form (a run of tokens as one string and its cut points) for
`retention`, and at most `max_finished` finished turns are kept, the oldest dropped first:
memory stays bounded by turns times `limits.max_reply_chars`, whatever clients do.

Nothing here is shared between processes: a turn of another worker, or of a process that
restarted, is found in the store instead (`stored`, service/turn/recovery.py), which
answers the turn again from its start.
"""

from __future__ import annotations

import re
import time
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from itertools import accumulate
from typing import Protocol

from sessiongate.core.events import TokenEvent, TurnEvent
from sessiongate.core.ids import is_session_id
from sessiongate.errors import InvalidInput, NotFound
from sessiongate.service.turn.handle import TurnHandle

#: The highest `Last-Event-ID` / `after` seq accepted: far beyond any turn's events, and
#: small enough that no digit string costs anything to read.
MAX_SEQ = 2**63 - 1
_SEQ = re.compile(r"[0-9]{1,19}")


class TurnNotFound(NotFound):
    """Unknown, expired, run by another process, or another user's (never say which)."""

    code = "turn_not_found"


class InvalidTurnId(InvalidInput):
    code = "invalid_turn_id"


class InvalidLastEventId(InvalidInput):
    code = "invalid_last_event_id"


def check_turn_id(turn_id: object) -> str:
    """A turn id in the shape this gateway issues (a lower-case UUIDv7), or 400."""
    if not isinstance(turn_id, str) or not is_session_id(turn_id):
        raise InvalidTurnId("a turn id is the `turn_id` of a `start` event (a UUIDv7)")
    return turn_id


def parse_seq(text: str) -> int | None:
    """A non-negative event seq written in decimal, or None."""
    if _SEQ.fullmatch(text) is None:
        return None
    seq = int(text)
    return seq if seq <= MAX_SEQ else None


def parse_last_event_id(value: str, turn_id: str) -> int:
    """The seq of `<turn_id>.<seq>` naming this turn, or 400 `invalid_last_event_id`."""
    named, dot, seq_text = value.strip().rpartition(".")
    seq = parse_seq(seq_text) if dot and named == turn_id else None
    if seq is None:
        raise InvalidLastEventId(
            f"Last-Event-ID must be `{turn_id}.<n>` with n a non-negative integer"
            " (the id of the last event received)"
        )
    return seq


def seq_after(value: str | None, turn_id: str) -> int | None:
    """The seq a joined stream resumes after, when `value` (a request's Last-Event-ID)
    names this turn; None otherwise (a header about another turn is not this one's)."""
    if value is None:
        return None
    named, dot, seq_text = value.strip().rpartition(".")
    return parse_seq(seq_text) if dot and named == turn_id else None


class StoredTurnSource(Protocol):
    """Turns read back from the store (service/turn/recovery.py)."""

    async def find(self, turn_id: str, owner: str) -> FollowedTurn | None: ...


class FollowedTurn(Protocol):
    """A turn whose events can be read again: running or kept."""

    @property
    def turn_id(self) -> str: ...

    @property
    def owner(self) -> str: ...

    #: The key's name in its owner's namespace (the WebSocket's `complete` names it).
    @property
    def key(self) -> str: ...

    def follow(self, after: int) -> AsyncIterator[tuple[int, TurnEvent]]: ...


@dataclass(frozen=True, slots=True)
class RunningTurn:
    turn_id: str
    owner: str
    key: str
    handle: TurnHandle

    def follow(self, after: int) -> AsyncIterator[tuple[int, TurnEvent]]:
        return self.handle.follow(after)


@dataclass(frozen=True, slots=True)
class TokenRun:
    """Consecutive tokens as one string: token i is `text[ends[i-1]:ends[i]]`."""

    text: str
    ends: array[int]


@dataclass(frozen=True, slots=True)
class KeptTurn:
    turn_id: str
    owner: str
    key: str
    #: When it ended, in `TurnJournal.now` seconds.
    ended: float
    parts: tuple[TurnEvent | TokenRun, ...]

    async def follow(self, after: int) -> AsyncIterator[tuple[int, TurnEvent]]:
        for seq, event in replay(self.parts, after):
            yield seq, event


def compact(events: list[TurnEvent]) -> tuple[TurnEvent | TokenRun, ...]:
    """`events` with each run of tokens folded into one `TokenRun` (the same seqs)."""
    parts: list[TurnEvent | TokenRun] = []
    tokens: list[str] = []

    def fold() -> None:
        if tokens:
            ends = array("q", accumulate(map(len, tokens)))
            parts.append(TokenRun("".join(tokens), ends))
            tokens.clear()

    for event in events:
        if isinstance(event, TokenEvent):
            tokens.append(event.content)
        else:
            fold()
            parts.append(event)
    fold()
    return tuple(parts)


def replay(parts: tuple[TurnEvent | TokenRun, ...], after: int) -> Iterator[tuple[int, TurnEvent]]:
    """The kept events with seq > `after`, in order, as they were emitted."""
    seq = 0
    for part in parts:
        if not isinstance(part, TokenRun):
            seq += 1
            if seq > after:
                yield seq, part
            continue
        count = len(part.ends)
        if seq + count <= after:
            seq += count  # the whole run was seen
            continue
        first = max(after - seq, 0)
        start = part.ends[first - 1] if first else 0
        for index in range(first, count):
            end = part.ends[index]
            yield seq + index + 1, TokenEvent(part.text[start:end])
            start = end
        seq += count


class TurnJournal:
    """Running turns and recently finished ones, by turn id, for their owners only."""

    def __init__(
        self,
        *,
        retention: timedelta = timedelta(minutes=10),
        max_finished: int = 1000,
        now: Callable[[], float] = time.monotonic,
        stored: StoredTurnSource | None = None,
    ) -> None:
        self.retention = retention.total_seconds()
        self.max_finished = max_finished
        #: Monotonic seconds: the journal lives in memory, wall-clock steps mean nothing.
        self.now = now
        #: Where a turn this process does not hold is looked for next; None: nowhere.
        self.stored = stored
        self._running: dict[str, RunningTurn] = {}
        #: Oldest first (the order they ended in), so pruning pops from the front.
        self._finished: OrderedDict[str, KeptTurn] = OrderedDict()

    def register(self, handle: TurnHandle, owner: str, key: str) -> None:
        """Keep `handle`'s turn readable by `owner` from now on (and after it ends)."""
        self._running[handle.turn_id] = RunningTurn(handle.turn_id, owner, key, handle)
        handle.on_close = self._ended
        self._prune()

    def find(self, turn_id: str, owner: str) -> FollowedTurn:
        """The turn, if `owner` ran it in this process and it is still kept; else 404."""
        self._prune()
        turn: FollowedTurn | None = self._running.get(turn_id)
        if turn is None:
            turn = self._finished.get(turn_id)
        if turn is None or turn.owner != owner:
            raise TurnNotFound("no such turn (unknown, expired, or run by another process)")
        return turn

    async def locate(self, turn_id: str, owner: str) -> FollowedTurn:
        """The turn from memory, else from the store (restated from its start); else 404,
        the same for another user's turn as for an unknown one."""
        try:
            return self.find(turn_id, owner)
        except TurnNotFound:
            if self.stored is None:
                raise
        turn = await self.stored.find(turn_id, owner)
        if turn is None:
            raise TurnNotFound("no such turn")
        return turn

    def __len__(self) -> int:
        return len(self._running) + len(self._finished)

    def _ended(self, handle: TurnHandle) -> None:
        running = self._running.pop(handle.turn_id, None)
        if running is None:
            return
        if self.max_finished > 0:
            self._finished[handle.turn_id] = KeptTurn(
                handle.turn_id, running.owner, running.key, self.now(), compact(handle.journal)
            )
        self._prune()

    def _prune(self) -> None:
        finished = self._finished
        while len(finished) > self.max_finished:
            finished.popitem(last=False)
        oldest_kept = self.now() - self.retention
        while finished:
            first = next(iter(finished.values()))
            if first.ended >= oldest_kept:
                break
            finished.popitem(last=False)
