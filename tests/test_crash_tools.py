"""A real process killed (SIGKILL) in the middle of a tool step: one call answered, one
still running. Nothing that was committed is lost, and the next process's model gets a
valid thread: the unanswered call is answered `interrupted` right after its request."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sessiongate.core.clock import ManualClock
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.core.tool_calls import INTERRUPTED_RESULT
from sessiongate.service.engine import build_engine
from tests.conftest import START, make_settings
from tests.support.agent_models import ToolModel, toolbox
from tests.support.helpers import collect
from tests.support.kill import kill_when_ready

CHILD = Path(__file__).parent / "support" / "crash_tool_child.py"
REF = KeyRef("alice", "chat:alice")


def run_child_and_kill(data_dir: Path) -> None:
    ready = data_dir / "ready"
    kill_when_ready(CHILD, [str(data_dir), str(ready)], ready, "the first tool result")


async def test_kill_mid_tool_step_keeps_what_finished_and_the_next_thread_is_valid(
    tmp_path: Path,
) -> None:
    run_child_and_kill(tmp_path)
    model = ToolModel("all good")
    engine = build_engine(
        make_settings(tmp_path, {"main": {"model": model.name, "tools": ["add", "sleep"]}}),
        clock=ManualClock(START + timedelta(minutes=1)),
        models={model.name: model},
    )
    engine.tools.add_source(toolbox())
    try:
        latest = await engine.store.latest_segment(REF)
        kept = await engine.store.list_messages(latest.session_id)
        assert [m.role for m in kept] == [Role.USER, Role.ASSISTANT, Role.TOOL]
        assert [c["id"] for c in kept[1].metadata["tool_calls"]] == ["quick", "slow"]
        assert (kept[2].metadata["tool_call_id"], kept[2].content) == ("quick", "42")

        events = await collect(engine, "are you back?")
        assert events[-1].type == "end", events
        sent = model.requests[0].messages
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool", "user"]
        assert (sent[2]["tool_call_id"], sent[2]["content"]) == ("quick", "42")
        assert (sent[3]["tool_call_id"], sent[3]["content"]) == ("slow", INTERRUPTED_RESULT)
        assert sent[3]["status"] == "interrupted"
    finally:
        await engine.aclose()
