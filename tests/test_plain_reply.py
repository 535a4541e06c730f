"""The plain reply path keeps what reached the client even when the hand-off that runs
after it is cut short."""

from __future__ import annotations

import asyncio
from typing import Any

from sessiongate.core.context import AssembledContext
from sessiongate.core.events import TokenEvent
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.core.tool_calls import ThreadItem
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.service.turn.plain_reply import stream_plain_reply
from tests.support.helpers import ScriptedModel


async def test_a_reply_is_kept_when_the_turn_is_cut_during_its_hand_off() -> None:
    kept: list[tuple[Role, str, dict[str, Any]]] = []
    started = asyncio.Event()

    async def append(
        role: Role,
        content: str,
        metadata: dict[str, Any],
        status: MessageStatus = MessageStatus.COMPLETE,
    ) -> Any:
        kept.append((role, content, metadata))
        return None

    async def hanging_handoff(text: str, handle: TurnHandle) -> str:
        started.set()
        await asyncio.Event().wait()
        return "never"

    handle = TurnHandle("t1")
    context = AssembledContext((ThreadItem("user", "hi", "m1"),), 1, 0)
    model = ScriptedModel("m", lambda messages: "here is your picture")
    task = asyncio.create_task(
        stream_plain_reply(
            {"m": model},
            ["m"],
            context,
            handle,
            append,
            max_reply_chars=1000,
            addendum=hanging_handoff,
        )
    )
    async with asyncio.timeout(10):
        await asyncio.wait(
            {task, asyncio.ensure_future(started.wait())}, return_when="FIRST_COMPLETED"
        )
    assert started.is_set(), task.exception() if task.done() else "the hand-off never started"
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    else:
        raise AssertionError("the cancellation was swallowed")
    assert [(role, content) for role, content, _ in kept] == [
        (Role.ASSISTANT, "here is your picture")
    ]
    assert kept[0][2]["handoff"] == "cancelled"
    tokens = [e.content for e in handle.ready() if isinstance(e, TokenEvent)]
    assert "".join(tokens) == "here is your picture"


async def test_shutdown_lets_quick_after_turn_work_finish_and_cancels_the_slow() -> None:
    from sessiongate.service.turn.after import AfterTurns
    from sessiongate.service.turn.handle import FinishedTurn

    done: list[str] = []
    cancelled: list[str] = []

    async def quick(turn: FinishedTurn) -> None:
        await asyncio.sleep(0.05)
        done.append(turn.turn_id)

    async def slow(turn: FinishedTurn) -> None:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.append(turn.turn_id)
            raise

    after = AfterTurns()
    after.add(quick)
    after.add(slow)
    after.schedule(
        FinishedTurn("alice", "k", "main", "t9", "complete", "s1", "hi", "hello", (), False, None)
    )
    await after.aclose(grace=0.5)
    assert done == ["t9"]
    assert cancelled == ["t9"]
