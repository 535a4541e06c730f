"""The child process of `test_crash_tools.py` (not a test module).

Usage: python crash_tool_child.py DATA_DIR READY_FILE

Starts a turn whose model asks for two tools at once: `add` answers at once, `sleep`
never does. Once `add`'s result is committed (its `tool_end` event follows the commit),
it writes READY_FILE and waits to be killed: the process dies mid-step, with one call
answered and one not.
"""

from __future__ import annotations

import asyncio
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from sessiongate.config import Settings
from sessiongate.core.clock import ManualClock
from sessiongate.service.engine import build_engine
from sessiongate.service.sessions import Caller
from sessiongate.service.turn.pipeline import InboundTurn
from tests.support.agent_models import Call, ToolModel, toolbox

KEY = "chat:alice"
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


async def main(data_dir: Path, ready: Path) -> None:
    model = ToolModel([Call("add", {"a": 40, "b": 2}, "quick"), Call("sleep", {}, "slow")])
    settings = Settings(
        data_dir=data_dir,
        lifecycle={"timezone": "UTC"},
        agents={"main": {"model": model.name, "tools": ["add", "sleep"]}},
        models={},
    )
    engine = build_engine(settings, clock=ManualClock(START), models={model.name: model})
    engine.tools.add_source(toolbox())
    handle = engine.turns.start_turn(InboundTurn(KEY, Caller("alice"), "add and wait"))
    async for event in handle.events():
        if event.type == "tool_end" and getattr(event, "call_id", "") == "quick":
            break
    tmp = ready.with_suffix(".tmp")
    tmp.write_text(f"{os.getpid()}\n", encoding="utf-8")
    tmp.replace(ready)
    await asyncio.sleep(120)  # the parent kills us long before this
    sys.exit("not killed")


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1]), Path(sys.argv[2])))
