"""What runs after a turn (webhooks, task extraction): in the background, never on the
turn's path, never able to change what the turn kept; failures are logged."""

from __future__ import annotations

import asyncio
import logging

from sessiongate.service.turn.handle import AfterTurn, FinishedTurn

log = logging.getLogger(__name__)


class AfterTurns:
    def __init__(self) -> None:
        self._listeners: list[AfterTurn] = []
        self._running: set[asyncio.Task[None]] = set()

    def add(self, listener: AfterTurn) -> None:
        self._listeners.append(listener)

    def schedule(self, finished: FinishedTurn) -> None:
        """Called by the turn as it ends; returns at once."""
        if not self._listeners:
            return
        task = asyncio.get_running_loop().create_task(self._run(finished))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _run(self, finished: FinishedTurn) -> None:
        for listener in self._listeners:
            try:
                await listener(finished)
            except Exception:  # one listener's bug must not stop the others
                log.exception("after-turn listener failed for turn %s", finished.turn_id)

    async def drain(self) -> None:
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def aclose(self, grace: float = 5.0) -> None:
        """Let what is running finish for up to `grace` seconds (queueing a webhook is one
        insert: a turn that ended just before shutdown keeps its event), then cancel the
        rest (a slow extraction)."""
        if self._running:
            await asyncio.wait(set(self._running), timeout=grace)
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
