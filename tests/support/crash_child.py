"""The child process of `test_crash.py` (not a test module).

Usage: python crash_child.py DATA_DIR READY_FILE TURNS

Runs TURNS complete turns on `chat:alice`, then starts one more turn ("final question")
whose model sends one token and then hangs forever. Once that turn's user message is
committed (the model is only called after the commit, and the child also reads it back),
it writes READY_FILE and waits to be killed.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from pathlib import Path

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelChunk,
    ModelOptions,
    TextDelta,
    Usage,
    WireMessage,
)
from sessiongate.service.engine import build_engine
from sessiongate.service.sessions import Caller
from sessiongate.service.turn.pipeline import InboundTurn

KEY = "chat:alice"
REF = KeyRef("alice", KEY)
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FINAL = "final question"


class HangingModel:
    """Replies in full, except to FINAL: one token, then it waits forever."""

    name = "crashy"

    def __init__(self) -> None:
        self.hanging = asyncio.Event()

    async def stream(
        self, messages: Sequence[WireMessage], options: ModelOptions = NO_OPTIONS
    ) -> AsyncIterator[ModelChunk]:
        last = messages[-1]["content"]
        if last != FINAL:
            yield TextDelta(f"reply to: {last}")
            yield Usage(prompt_tokens=len(messages), completion_tokens=3)
            return
        yield TextDelta("partial")
        self.hanging.set()
        await asyncio.Event().wait()  # never set


async def main(data_dir: Path, ready: Path, turns: int) -> None:
    settings = Settings(
        data_dir=data_dir,
        lifecycle={"timezone": "UTC"},
        agents={"defaults": {"model": "crashy"}},
        models={},
    )
    model = HangingModel()
    engine = build_engine(settings, clock=ManualClock(START), models={"crashy": model})
    caller = Caller("alice")
    for index in range(turns):
        handle = engine.turns.start_turn(InboundTurn(KEY, caller, f"turn {index}"))
        events = [event async for event in handle.events()]
        assert events[-1].type == "end", events

    handle = engine.turns.start_turn(InboundTurn(KEY, caller, FINAL))
    await asyncio.wait_for(model.hanging.wait(), 30)
    latest = await engine.store.latest_segment(REF)
    last = (await engine.store.list_messages(latest.session_id, limit=1000))[-1]
    assert (last.role.value, last.content) == ("user", FINAL), last
    assert handle.task is not None and not handle.task.done()  # the turn is mid-reply

    tmp = ready.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()} {latest.session_id} {last.seq}\n", encoding="utf-8")
    tmp.replace(ready)  # appears atomically
    print("READY", flush=True)
    await asyncio.sleep(120)  # the parent kills us long before this
    sys.exit("not killed")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])))
