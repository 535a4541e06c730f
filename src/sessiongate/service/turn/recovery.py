"""A turn read back from the store, for a client resuming a turn that this process does
not hold in memory: the process restarted since, or another worker (PostgreSQL) ran it.

The answer restates the turn from the start (a client redraws a turn when it sees its
`start`): `start`, one `token` with the whole stored reply (if any), then `end` with the
reply's message id and status (complete, truncated or interrupted), or `error` when no
reply was stored. Its seqs run from 1 and are not the original turn's.

A turn whose user message is stored but whose reply is not yet may still be running in
another process: it is polled, with backoff, until its reply is there, or no process holds
its key any more (a turn holds its key's lock for its whole run), or the agent's
`turn_timeout` has passed; then the store's answer is given, whatever it is.

Live tokens from another worker are not relayed: the PostgreSQL NOTIFY fan-out carries
WebSocket frames of WebSocket turns only (a REST turn is announced once it has ended),
without SSE seqs, so following a turn there would miss most turns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

from sessiongate.core.events import EndEvent, ErrorEvent, StartEvent, TokenEvent, TurnEvent
from sessiongate.core.safety.verdict import Label
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.store.base import Store
from sessiongate.store.turns import StoredTurn, TurnRecords

#: Set on messages a forked conversation copied into the turn's segment
#: (service/conversation/reconcile.py): they carry the turn's id but are not its reply.
COPIED_FROM = "copied_from"
FIRST_POLL_SECONDS = 0.05
MAX_POLL_SECONDS = 1.0
#: Beyond the agent's `turn_timeout`: the turn's own clock starts once it holds its key.
WAIT_GRACE = timedelta(seconds=5)

NO_REPLY = ErrorEvent(
    "interrupted",
    "the turn ended without a stored reply: it failed, or the process running it stopped",
    502,
)
UNSAFE = ErrorEvent("unsafe_request", "the request was classified unsafe; nothing was run", 400)


# -- the functional core: what a stored turn answers ---------------------------------------


def reply_of(turn: StoredTurn) -> Message | None:
    """The turn's reply: its last assistant message after its last user message (the
    copies a fork made of earlier messages left out)."""
    reply: Message | None = None
    for message in turn.messages:
        if COPIED_FROM in message.metadata:
            continue
        if message.role is Role.USER:
            reply = None
        elif message.role is Role.ASSISTANT:
            reply = message
    return reply


def is_settled(turn: StoredTurn) -> bool:
    """Whether the store already holds all the turn will ever store: a final reply (not a
    step that asked for tools), or a later turn came after it."""
    if turn.superseded:
        return True
    reply = reply_of(turn)
    if reply is None:
        return False
    return reply.status is MessageStatus.INTERRUPTED or not reply.metadata.get("tool_calls")


def reply_status(reply: Message) -> str:
    if reply.status is MessageStatus.INTERRUPTED:
        return "interrupted"
    return "truncated" if reply.metadata.get("truncated") else "complete"


def _usage(metadata: Mapping[str, Any]) -> dict[str, int]:
    """The kept usage: its counts, and `estimated` when it was an estimate."""
    usage = metadata.get("usage")
    if not isinstance(usage, dict):
        return {}
    kept = {k: v for k, v in usage.items() if isinstance(v, int) and not isinstance(v, bool)}
    if usage.get("estimated") is True:
        kept["estimated"] = True
    return kept


def _was_unsafe(turn: StoredTurn) -> bool:
    users = [m for m in turn.messages if m.role is Role.USER]
    verdict = users[-1].metadata.get("classification") if users else None
    return isinstance(verdict, dict) and verdict.get("label") == Label.UNSAFE.value


def ending_events(turn: StoredTurn) -> list[TurnEvent]:
    """What follows `start`: the whole reply as one token and `end`, or the `error`."""
    reply = reply_of(turn)
    if reply is None:
        return [UNSAFE if _was_unsafe(turn) else NO_REPLY]
    events: list[TurnEvent] = [TokenEvent(reply.content)] if reply.content else []
    events.append(
        EndEvent(reply.message_id, reply.seq, _usage(reply.metadata), reply_status(reply))
    )
    return events


def agent_of(turn: StoredTurn) -> str | None:
    for message in turn.messages:
        agent = message.metadata.get("agent")
        if message.role is Role.USER and isinstance(agent, str):
            return agent
    return None


# -- the shell: reading and waiting ---------------------------------------------------------


class StoredTurnReplay:
    """A turn found in the store, as `TurnJournal.locate` hands it out (a FollowedTurn)."""

    def __init__(
        self,
        records: TurnRecords,
        found: StoredTurn,
        owner: str,
        wait_limit: timedelta,
        *,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._records = records
        self._found = found
        self._owner = owner
        self._wait_limit = wait_limit.total_seconds()
        self._sleep = sleep
        self._now = now

    @property
    def turn_id(self) -> str:
        return self._found.turn_id

    @property
    def owner(self) -> str:
        return self._owner

    @property
    def key(self) -> str:
        return self._found.key.name

    async def follow(self, after: int) -> AsyncIterator[tuple[int, TurnEvent]]:
        """The whole turn again; `after` is ignored, as the seqs are the replay's own."""
        found = self._found
        yield 1, StartEvent(found.key.name, found.session_id, found.turn_id)
        settled = await self.settle()
        for seq, event in enumerate(ending_events(settled), start=2):
            yield seq, event

    async def settle(self) -> StoredTurn:
        """The turn once nothing more will be stored for it, or as it is at the deadline."""
        turn = self._found
        deadline = self._now() + self._wait_limit
        delay = FIRST_POLL_SECONDS
        while not is_settled(turn):
            # The lock first: free before the read means the read sees all the turn wrote.
            busy = await self._records.key_busy(turn.key)
            turn = await self._records.find_turn(self._owner, turn.turn_id) or turn
            remaining = deadline - self._now()
            if not busy or remaining <= 0:
                break
            await self._sleep(min(delay, remaining))
            delay = min(delay * 2, MAX_POLL_SECONDS)
        return turn


class StoredTurns:
    """Finds the caller's turns in the store (the fallback of service/turn/journal.py)."""

    def __init__(
        self,
        records: TurnRecords,
        turn_timeouts: Mapping[str, timedelta],
        default_timeout: timedelta,
    ) -> None:
        self.records = records
        self._timeouts = turn_timeouts
        self._default_timeout = default_timeout

    async def find(self, turn_id: str, owner: str) -> StoredTurnReplay | None:
        found = await self.records.find_turn(owner, turn_id)
        if found is None:
            return None
        wait = self._timeouts.get(agent_of(found) or "", self._default_timeout) + WAIT_GRACE
        return StoredTurnReplay(self.records, found, owner, wait)


def build_turn_records(store: Store) -> TurnRecords:
    """The turn lookup beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.turns import SQLiteTurnRecords

        return SQLiteTurnRecords(store)
    # Imported here so a SQLite gateway never loads the driver.
    from sessiongate.store.postgres.store import PostgresStore
    from sessiongate.store.postgres.turns import PostgresTurnRecords

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no turn lookup for {type(store).__name__}")
    return PostgresTurnRecords(store)
