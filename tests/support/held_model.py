"""A reply model a test can hold mid-reply: for dropping and resuming a stream while the
turn is still running (tests/test_resume.py, tests/test_resume_store.py)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Sequence

from sessiongate.models.base import NO_OPTIONS, ModelChunk, ModelOptions, TextDelta, Usage
from sessiongate.models.base import WireMessage as Wire


class HeldModel:
    """Replies `reply to: <content>` word by word; `hold <tag> …` stops after `held_after`
    words until `release(tag)`. Threading events: the gateways run in other threads."""

    name = "scripted"

    def __init__(self, held_after: int) -> None:
        self.held_after = held_after
        self._lock = threading.Lock()
        self._gates: dict[str, tuple[threading.Event, threading.Event]] = {}

    def gate(self, tag: str) -> tuple[threading.Event, threading.Event]:
        """(set once the reply is held, set to let it go on)."""
        with self._lock:
            return self._gates.setdefault(tag, (threading.Event(), threading.Event()))

    def release(self, tag: str) -> None:
        self.gate(tag)[1].set()

    async def stream(
        self, messages: Sequence[Wire], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        content = str(messages[-1]["content"])
        words = f"reply to: {content}".split(" ")
        parts = content.split(" ")
        tag = parts[1] if parts[0] == "hold" and len(parts) > 1 else None
        for index, word in enumerate(words):
            if index == self.held_after and tag is not None:
                started, release = self.gate(tag)
                started.set()
                # Polled (the release comes from another thread), not waited on in a
                # thread of its own: a gateway shutting down cancels it at once.
                while not release.is_set():  # noqa: ASYNC110
                    await asyncio.sleep(0.01)
            yield TextDelta(word if index == 0 else " " + word)
            await asyncio.sleep(0)
        yield Usage(prompt_tokens=len(messages), completion_tokens=len(words))
