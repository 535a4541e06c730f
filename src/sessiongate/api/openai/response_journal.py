"""Each response's events as they were numbered, kept in this process for a while, so
`GET /v1/responses/{id}?stream=true&starting_after=N` sends a client the events after N
again — and follows a response still running (a background one, a dropped stream) until
it ends (DESIGN.md §14). A response this process no longer holds is restated from its
kept object (core/response_events.py `replay`: the same kinds, its text in one delta).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from typing import Any

from fastapi import Request

#: How many responses' events one process keeps (the oldest go first).
MAX_RESPONSES = 256


@dataclass
class JournalEntry:
    events: list[dict[str, Any]] = field(default_factory=list)
    done: bool = False
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, event: dict[str, Any]) -> None:
        self.events.append(event)
        if event["type"] in ("response.completed", "response.incomplete", "response.failed"):
            self.done = True
        self.changed.set()

    def close(self) -> None:
        """The stream ended (or was dropped before its last event)."""
        self.done = True
        self.changed.set()

    async def follow(self, after: int) -> AsyncIterator[dict[str, Any]]:
        """The events numbered after `after`, then the new ones until the response ends."""
        sent = 0
        while True:
            while sent < len(self.events):
                event = self.events[sent]
                sent += 1
                if event["sequence_number"] > after:
                    yield event
            if self.done:
                return
            self.changed.clear()
            if sent < len(self.events) or self.done:
                continue
            await self.changed.wait()


class ResponseJournal:
    def __init__(self, max_responses: int = MAX_RESPONSES) -> None:
        self.max_responses = max_responses
        self._entries: OrderedDict[tuple[str, str], JournalEntry] = OrderedDict()
        #: The pumps running: a response runs to its end whoever reads it.
        self._tasks: set[asyncio.Task[None]] = set()

    def run(self, pump: Coroutine[Any, Any, None]) -> asyncio.Task[None]:
        task = asyncio.create_task(pump)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def open(self, owner: str, response_id: str) -> JournalEntry:
        entry = JournalEntry()
        self._entries[(owner, response_id)] = entry
        while len(self._entries) > self.max_responses:
            self._entries.popitem(last=False)
        return entry

    def get(self, owner: str, response_id: str) -> JournalEntry | None:
        return self._entries.get((owner, response_id))

    def forget(self, owner: str, response_id: str) -> None:
        self._entries.pop((owner, response_id), None)


def journal_of(request: Request) -> ResponseJournal:
    state = request.app.state
    found: ResponseJournal | None = getattr(state, "response_journal", None)
    if found is None:
        found = ResponseJournal()
        state.response_journal = found
    return found
