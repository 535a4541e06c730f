"""The data a turn starts from and the handle its events flow through."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from sessiongate.core.attachments import ImageAttachment
from sessiongate.core.events import EndEvent, ErrorEvent, TurnEvent
from sessiongate.core.routing import RouteDecision
from sessiongate.core.users import Caller
from sessiongate.service.conversation.client_turn import ClientTurn


@dataclass(frozen=True, slots=True)
class RecallRequest:
    query: str
    rationale: str
    limit: int = 5
    #: "key": this key's archived segments; "all": every key of the caller (DESIGN.md §13).
    scope: str = "key"


@dataclass(frozen=True, slots=True)
class ResumedTurn:
    """A turn whose process died after it stored its user message and before any reply
    (found through its idempotency row, service/idempotency.py): the retry of the same
    request answers that message, under the same turn id, instead of storing it again."""

    turn_id: str
    session_id: str
    #: The user message's seq: the retry answers it only while it is still the last
    #: message of its segment (else it is stored again, as after any crash).
    seq: int


@dataclass(frozen=True, slots=True)
class InboundTurn:
    #: The key's name; it lives in the caller's namespace (`Caller.key`).
    key: str
    caller: Caller
    content: str
    agent: str | None = None
    recall: RecallRequest | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    #: Agent-as-tool delegation depth: 0 for a user's own turn.
    depth: int = 0
    #: A reply model for this turn only (seed 002's `provider` switch); it wins over the
    #: session's override and the agent's model.
    reply_model: str | None = None
    #: How a request that named no key was routed (None: the client named the key).
    route: RouteDecision | None = None
    #: Images sent with the turn, already checked (core/attachments.py).
    attachments: tuple[ImageAttachment, ...] = ()
    #: Speak the reply: an `audio` event follows `end` (DESIGN.md §9).
    speak: bool = False
    #: An OpenAI-compatible request: the client's whole list, reconciled with the stored
    #: thread before the turn (service/conversation/reconcile.py).
    client: ClientTurn | None = None
    #: The caller was found allowed to run `agent` (service/agent_access.py), which is
    #: then always set; a turn not admitted is checked when it starts.
    admitted: bool = False
    #: The request was counted against the caller's quotas (service/quotas.py).
    counted: bool = False
    #: Stream the model's reasoning as `reasoning` events (the Responses API).
    reasoning_events: bool = False
    #: Hosted tool types (Responses API `web_search`) the client offered that the agent
    #: runs as its own tools (`[agents.<name>] hosted_tools`).
    hosted_tools: tuple[str, ...] = ()
    #: This request's turn died after storing its user message: answer that one.
    resumes: ResumedTurn | None = None


@dataclass(frozen=True, slots=True)
class TurnOutcome:
    """How a turn ended, for metrics and hooks."""

    agent: str
    status: str  # complete | interrupted | failed | command
    seconds: float
    key: str = ""
    turn_id: str = ""
    model: str | None = None
    first_token_seconds: float | None = None
    error_code: str | None = None


TurnListener = Callable[[TurnOutcome], None]


@dataclass(frozen=True, slots=True)
class FinishedTurn:
    """A turn that ended, for what runs after it (hooks, task extraction): in the
    background, never on the turn's path, never able to change what was kept."""

    owner: str
    key: str
    agent: str
    turn_id: str
    #: complete, truncated, interrupted, failed or command (a bare `/new`).
    status: str
    session_id: str | None
    user_text: str
    reply_text: str | None
    #: The rotations the turn made: `{from, to, reason, confidence, deciding_model}`.
    rotations: tuple[dict[str, Any], ...]
    primary: bool
    mode: str | None
    error_code: str | None = None
    #: The offline stand-in wrote the reply: extraction has nothing to read in it.
    offline: bool = False


AfterTurn = Callable[[FinishedTurn], Awaitable[None]]


class TurnHandle:
    """A running turn. Its events can be read once, in order (`events`, the transport that
    started it); any number of followers may read them again (`follow`, a client that
    reconnects). The turn does not depend on either."""

    def __init__(self, turn_id: str) -> None:
        self.turn_id = turn_id
        self._queue: asyncio.Queue[TurnEvent | None] = asyncio.Queue()
        self.task: asyncio.Task[None] | None = None
        self.status = "failed"
        self.model: str | None = None
        #: The offline stand-in answered (models/offline.py): nothing was learned.
        self.offline = False
        self.first_token_seconds: float | None = None
        self.error_code: str | None = None
        #: Filled in as the turn goes, for what runs after it (FinishedTurn).
        self.session_id: str | None = None
        self.reply_text: str | None = None
        self.rotations: list[dict[str, Any]] = []
        #: The client's own tools the model asked for (an OpenAI client runs them):
        #: `{id, name, arguments}` each (service/turn/client_reply.py).
        self.tool_calls: list[dict[str, str]] = []
        #: Emit the model's reasoning as `ReasoningEvent`s (the Responses API asks;
        #: set before the turn's task first runs).
        self.reasoning_events = False
        #: Set once the context is assembled and what it announces (a compaction, a trim)
        #: emitted, just before the model is asked (api/openai/announced.py).
        self.context_ready = asyncio.Event()
        #: Every event emitted so far; event `seq` is at index `seq - 1` (seq 1 is `start`).
        self.journal: list[TurnEvent] = []
        self.closed = False
        #: Followers waiting for the next event; woken (and dropped) at each one.
        self._waiting: list[asyncio.Future[None]] = []
        #: Called once when the stream ends (service/turn/journal.py keeps the turn).
        self.on_close: Callable[[TurnHandle], None] | None = None

    def emit(self, event: TurnEvent) -> None:
        if isinstance(event, EndEvent):
            self.status = event.status if event.message_id else "command"
        # The turn's hot path: one append and one test, no lock, no await.
        self.journal.append(event)
        self._queue.put_nowait(event)
        if self._waiting:
            self._wake()

    def fail(self, code: str, message: str, status: int = 502) -> None:
        self.error_code = code
        event = ErrorEvent(code, message, status)
        self.journal.append(event)
        self._queue.put_nowait(event)
        if self._waiting:
            self._wake()

    def close(self) -> None:
        self._queue.put_nowait(None)
        if self.closed:
            return
        self.closed = True
        self._wake()
        if self.on_close is not None:
            self.on_close(self)

    async def events(self) -> AsyncIterator[TurnEvent]:
        while (event := await self._queue.get()) is not None:
            yield event

    async def follow(self, after: int = 0) -> AsyncIterator[tuple[int, TurnEvent]]:
        """`(seq, event)` for every event with seq > `after`: those already emitted, then
        the rest as they come, until the stream ends. Never touches the `events` queue."""
        seq = max(after, 0)
        while True:
            journal = self.journal
            while seq < len(journal):
                event = journal[seq]
                seq += 1
                yield seq, event
            if self.closed:
                return
            waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._waiting.append(waiter)
            try:
                await waiter
            finally:
                # Woken: already dropped. Cancelled (the follower left): drop it now.
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiter)

    def _wake(self) -> None:
        waiting, self._waiting = self._waiting, []
        for waiter in waiting:
            if not waiter.done():
                waiter.set_result(None)

    def ready(self) -> list[TurnEvent]:
        """The events already queued, without waiting: lets a transport write a burst of
        tokens in one send. Stops at the end of the stream (leaving the marker queued)."""
        batch: list[TurnEvent] = []
        while not self._queue.empty():
            event = self._queue.get_nowait()
            if event is None:
                self._queue.put_nowait(None)
                break
            batch.append(event)
        return batch

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()

    async def wait(self) -> None:
        if self.task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(self.task)
