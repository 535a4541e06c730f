"""Exactly-once turns (DESIGN.md §11): a request carrying an `Idempotency-Key` header (or
`client_message_id`) runs its turn once; a retry is answered from that turn.

- A retry after the turn ended is answered from its kept outcome (across restarts): the
  events `start`, any `rotation`, one `token` with the whole reply, then `end` (or the
  `error` that ended it). Each route renders them in its usual shape.
- A retry while the turn runs in this process joins its stream: it receives every event
  so far, then the rest as they come. A retry in another process (PostgreSQL) finds the
  `running` row and waits (polling, bounded by `wait_limit`) for the outcome; a `running`
  row older than `stale_after` (its process died) is taken over and the turn runs again.
- The same key with another request body is refused (`idempotency_key_reused`, 422).
- A replay or a join is not counted against the caller's quotas: the request is counted
  (`admit`) only when its turn starts here, after the key is claimed.
- A turn that ended before its `start` event (nothing stored) releases the key: a retry
  runs for real.
- A `running` row whose process died (PostgreSQL: its liveness lock is gone) is not waited
  on: if its turn had stored its reply, the retry is answered from that reply (and the
  row kept as `done`); otherwise the row is released and the retry runs the turn. When
  the dead turn had stored its user message and it is still the last of its segment, the
  retry answers that message under the dead turn's id instead of storing it again
  (`ResumedTurn`): the question is kept once, with its answer right after it.

Keys are per owner: another user's equal key is another turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import orjson

from sessiongate.core.clock import Clock
from sessiongate.core.events import (
    EndEvent,
    ErrorEvent,
    RotationEvent,
    StartEvent,
    TokenEvent,
    TurnEvent,
)
from sessiongate.core.segments import Role
from sessiongate.errors import Conflict, InvalidInput, SessionGateError
from sessiongate.service.turn.handle import ResumedTurn, TurnHandle
from sessiongate.service.turn.recovery import build_turn_records, ending_events, reply_of
from sessiongate.store.base import Store
from sessiongate.store.idempotency import IdempotencyRecord, IdempotencyStore
from sessiongate.store.turns import StoredTurn, TurnRecords

#: 1-200 characters of a safe alphabet (UUIDs, ULIDs, base64url and the like).
_KEY = re.compile(r"[A-Za-z0-9._:~+/=-]{1,200}")


class IdempotencyKeyReused(SessionGateError):
    code = "idempotency_key_reused"
    status = 422


class IdempotencyKeyBusy(Conflict):
    code = "idempotency_key_in_progress"


@dataclass(frozen=True, slots=True)
class IdempotentRequest:
    owner: str
    key: str
    fingerprint: str


def idempotent_request(
    owner: str, header: str | None, body_id: object, route: str, fields: Mapping[str, Any]
) -> IdempotentRequest | None:
    """The request's key (the header wins over `client_message_id`), checked, with a hash
    of `fields` (what the request asks for) and the route; None: no key was sent."""
    value = header if header is not None else body_id
    if value is None:
        return None
    if not isinstance(value, str) or _KEY.fullmatch(value) is None:
        raise InvalidInput(
            "an idempotency key is 1-200 characters of letters, digits and ._:~+/=-",
            code="invalid_idempotency_key",
        )
    payload = orjson.dumps({"route": route, **fields}, option=orjson.OPT_SORT_KEYS)
    return IdempotentRequest(owner, value, hashlib.sha256(payload).hexdigest())


class RepeatedTurn(TurnHandle):
    """A handle on a turn another request started (joined or replayed): its events were
    already announced, so a transport does not broadcast them again."""


class ReplayedTurn(RepeatedTurn):
    """A finished turn answered from its kept outcome: a short stream of its own (start,
    rotations, one token, end), whose seqs are not the original turn's. A client that
    resumes (`Last-Event-ID`) gets it whole and redraws the turn from `start`."""


class _Running:
    """One running turn's events, fanned out to every request that carries its key."""

    def __init__(self, request: IdempotentRequest, turn: TurnHandle) -> None:
        self.request = request
        self.turn = turn
        self.seen: list[TurnEvent] = []
        self.listeners: list[TurnHandle] = []
        self.ended = False

    def join(self, *, repeat: bool = True) -> TurnHandle:
        handle = (RepeatedTurn if repeat else TurnHandle)(self.turn.turn_id)
        handle.tool_calls = self.turn.tool_calls  # the same list: filled as the turn goes
        for event in self.seen:
            handle.emit(event)
        if self.ended:
            handle.close()
        else:
            self.listeners.append(handle)
        return handle

    def forward(self, event: TurnEvent) -> None:
        self.seen.append(event)
        for handle in self.listeners:
            handle.emit(event)

    def end(self) -> None:
        self.ended = True
        for handle in self.listeners:
            handle.close()


class IdempotencyService:
    def __init__(
        self,
        rows: IdempotencyStore,
        clock: Clock,
        *,
        retention: timedelta = timedelta(hours=24),
        wait_limit: timedelta = timedelta(minutes=1),
        stale_after: timedelta = timedelta(minutes=10),
        poll_seconds: float = 0.2,
        records: TurnRecords | None = None,
    ) -> None:
        self.rows = rows
        #: Where an abandoned row's turn is looked up (None: rows are never abandoned).
        self.records = records
        self.clock = clock
        self.retention = retention
        #: How long a retry waits for a turn running in another process before it is
        #: answered 409 `idempotency_key_in_progress` (and may retry).
        self.wait_limit = wait_limit
        #: A `running` row older than this (its process died) is taken over.
        self.stale_after = stale_after
        self.poll_seconds = poll_seconds
        self._running: dict[tuple[str, str], _Running] = {}
        self._pumps: set[asyncio.Task[None]] = set()
        self._last_prune: datetime | None = None

    async def run(
        self,
        request: IdempotentRequest,
        start: Callable[[ResumedTurn | None], TurnHandle],
        admit: Callable[[], Awaitable[None]] | None = None,
    ) -> TurnHandle:
        """A handle on the request's turn: started now, joined, or replayed. `start`
        starts it, answering the question a dead turn of this request stored if given.
        `admit` (the quotas) runs only when the turn is to start here, once the key is
        claimed and before anything else is stored: a replay or a join costs nothing; a
        refusal releases the key and is raised."""
        deadline = asyncio.get_running_loop().time() + self.wait_limit.total_seconds()
        resumed: ResumedTurn | None = None
        while True:
            running = self._running.get((request.owner, request.key))
            if running is not None:
                self._same_body(request, running.request.fingerprint)
                return running.join()
            now = self.clock.now()
            await self._prune(now)
            record = await self.rows.claim(
                request.owner, request.key, request.fingerprint, now, now - self.stale_after
            )
            if record is None:
                if admit is not None:
                    try:
                        await admit()
                    except BaseException:
                        await self.rows.release(request.owner, request.key)
                        raise
                return self._start(request, start, resumed)
            self._same_body(request, record.fingerprint)
            if record.status == "done" and record.result is not None:
                return replay(record)
            if record.abandoned:
                kept, resumed = await self._answer_abandoned(record)
                if kept is not None:
                    return replay(kept)
                await self.rows.release(request.owner, request.key)
                continue
            if asyncio.get_running_loop().time() > deadline:
                raise IdempotencyKeyBusy(
                    "a turn with this idempotency key is still running; retry later"
                )
            await asyncio.sleep(self.poll_seconds)

    async def aclose(self) -> None:
        for task in list(self._pumps):
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _answer_abandoned(
        self, record: IdempotencyRecord
    ) -> tuple[IdempotencyRecord | None, ResumedTurn | None]:
        """The outcome of an abandoned row's turn when it stored its reply (kept on the
        row, now `done`); else None and, when it stored its user message as the last of
        its segment, that message for the retry to answer."""
        turn_id = (record.result or {}).get("turn_id")
        if self.records is None or not isinstance(turn_id, str):
            return None, None
        found = await self.records.find_turn(record.owner, turn_id)
        if found is None:
            return None, None
        if reply_of(found) is None:
            return None, unanswered(found)
        start = StartEvent(found.key.name, found.session_id, found.turn_id)
        result = outcome([start, *ending_events(found)], [])
        if result is None:
            return None, None
        await self.rows.finish(record.owner, record.key, result)
        return replace(record, status="done", result=result, abandoned=False), None

    def _same_body(self, request: IdempotentRequest, fingerprint: str) -> None:
        if fingerprint != request.fingerprint:
            raise IdempotencyKeyReused(
                "this idempotency key was used with another request; use a new key"
            )

    def _start(
        self,
        request: IdempotentRequest,
        start: Callable[[ResumedTurn | None], TurnHandle],
        resumed: ResumedTurn | None,
    ) -> TurnHandle:
        slot = (request.owner, request.key)
        try:
            turn = start(resumed)
        except BaseException:
            self._spawn(self.rows.release(request.owner, request.key))
            raise
        running = _Running(request, turn)
        self._running[slot] = running
        # Named on the row, so that if this process dies another finds what it stored.
        self._spawn(self.rows.started(request.owner, request.key, turn.turn_id))
        listener = running.join(repeat=False)
        self._spawn(self._pump(running))
        return listener

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._pumps.add(task)
        task.add_done_callback(self._pumps.discard)

    async def _pump(self, running: _Running) -> None:
        """Read the turn to its end whoever listens, then keep its outcome (or release
        the key when the turn stored nothing)."""
        request = running.request
        try:
            async for event in running.turn.events():
                running.forward(event)
        finally:
            running.end()
            try:
                result = outcome(running.seen, running.turn.tool_calls)
                if result is None:
                    await self.rows.release(request.owner, request.key)
                else:
                    await self.rows.finish(request.owner, request.key, result)
            finally:
                self._running.pop((request.owner, request.key), None)

    async def _prune(self, now: datetime) -> None:
        if self._last_prune is not None and now - self._last_prune < timedelta(minutes=1):
            return
        self._last_prune = now
        await self.rows.prune(now - self.retention)


def unanswered(turn: StoredTurn) -> ResumedTurn | None:
    """The dead turn's question, when the turn stored just that and nothing came after
    it in its segment (the pipeline checks again under the key's lock)."""
    if turn.superseded or [m.role for m in turn.messages] != [Role.USER]:
        return None
    return ResumedTurn(turn.turn_id, turn.session_id, turn.messages[0].seq)


def outcome(events: list[TurnEvent], tool_calls: list[Any]) -> dict[str, Any] | None:
    """What a replay answers from; None when the turn ended before `start` (no user
    message was kept, so the request may run again)."""
    if not events or not isinstance(events[0], StartEvent):
        return None
    result: dict[str, Any] = {
        "start": _fields(events[0]),
        "rotations": [],
        "reply": "",
        "end": None,
        "error": None,
        "tool_calls": list(tool_calls),
    }
    reply: list[str] = []
    for event in events[1:]:
        if isinstance(event, RotationEvent):
            result["rotations"].append(_fields(event))
        elif isinstance(event, TokenEvent):
            reply.append(event.content)
        elif isinstance(event, EndEvent):
            result["end"] = _fields(event)
        elif isinstance(event, ErrorEvent):
            result["error"] = _fields(event)
    result["reply"] = "".join(reply)
    if result["end"] is None and result["error"] is None:
        result["error"] = {"code": "interrupted", "message": "the turn was interrupted"}
    return result


def replay(record: IdempotencyRecord) -> TurnHandle:
    """A finished turn's kept outcome as a short event stream: start, rotations, one token
    with the whole reply, then end or error."""
    result = record.result or {}
    start = StartEvent(**result["start"])
    handle = ReplayedTurn(start.turn_id)
    handle.tool_calls = list(result.get("tool_calls") or [])
    handle.emit(start)
    for rotation in result.get("rotations") or []:
        handle.emit(RotationEvent(**rotation))
    if result.get("reply"):
        handle.emit(TokenEvent(result["reply"]))
    if result.get("end") is not None:
        handle.emit(EndEvent(**result["end"]))
    else:
        handle.emit(ErrorEvent(**result["error"]))
    handle.close()
    return handle


def _fields(event: TurnEvent) -> dict[str, Any]:
    fields = asdict(event)
    fields.pop("type", None)
    return fields


def build_idempotency_service(
    store: Store, clock: Clock, retention: timedelta
) -> IdempotencyService:
    """The idempotency rows beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: IdempotencyStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.idempotency import SQLiteIdempotencyStore

        rows = SQLiteIdempotencyStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.idempotency import PostgresIdempotencyStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no idempotency store for {type(store).__name__}")
        rows = PostgresIdempotencyStore(store)
    return IdempotencyService(rows, clock, retention=retention, records=build_turn_records(store))
