"""Test stand-ins for the one thing that cannot run here: a hosted reply model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from sessiongate.errors import ModelError
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    TextDelta,
    Usage,
    WireMessage,
)

if TYPE_CHECKING:
    from sessiongate.service.engine import Engine


class ScriptedModel:
    """Replies with `reply(messages)`, split into word tokens; records every request."""

    def __init__(
        self,
        name: str = "scripted",
        reply: Callable[[Sequence[WireMessage]], str] | None = None,
        *,
        fail: ModelError | None = None,
        fail_after_tokens: int | None = None,
        gate: asyncio.Event | None = None,
        started: asyncio.Event | None = None,
    ) -> None:
        self.name = name
        self._reply = reply or (lambda msgs: f"reply to: {msgs[-1]['content']}")
        self.fail = fail
        self.fail_after_tokens = fail_after_tokens
        self.gate = gate
        self.started = started
        self.requests: list[list[dict[str, str]]] = []

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        self.requests.append([dict(m) for m in messages])
        if self.fail is not None and self.fail_after_tokens is None:
            raise self.fail
        words = self._reply(messages).split(" ")
        for index, word in enumerate(words):
            if self.started is not None and index == 1:
                self.started.set()
            if self.gate is not None and index == 1:
                await self.gate.wait()
            if self.fail is not None and index == self.fail_after_tokens:
                raise self.fail
            yield TextDelta(word if index == 0 else " " + word)
            await asyncio.sleep(0)
        yield Usage(prompt_tokens=len(messages), completion_tokens=len(words))


async def collect(
    engine: Engine, content: str, key: str = "chat:alice", **kwargs: Any
) -> list[Any]:
    """Run one turn through the engine and return its events (`Any`: tests read the
    fields of whichever event type they expect at each position)."""
    from sessiongate.service.sessions import Caller
    from sessiongate.service.turn.pipeline import InboundTurn

    caller = kwargs.pop("caller", Caller("alice"))
    inbound = InboundTurn(key=key, caller=caller, content=content, **kwargs)
    return [event async for event in engine.turns.run_turn(inbound)]


def types(events: Sequence[Any]) -> list[str]:
    return [e.type for e in events]


async def eventually(
    check: Callable[[], bool | Awaitable[bool]], within: float, every: float = 0.05
) -> None:
    """Wait until `check` (sync or async) holds, asking every `every` seconds; fail the
    test when it has not within `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        result = check()
        if not isinstance(result, bool):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not hold in time")
        await asyncio.sleep(every)
