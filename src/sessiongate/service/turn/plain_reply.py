"""The reply of an agent without tools, a plan or an output contract: one streamed model
call through the fallback chain, kept as the assistant message.

Text that reached the client is never dropped: a model that fails, or a turn cancelled,
after the first token keeps what came as an `interrupted` message (and the turn then ends
with the error). A reply cut at `limits.max_reply_chars` is kept `complete` and marked
`truncated`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, NoReturn

from sessiongate.core.context import AssembledContext
from sessiongate.core.events import EndEvent, TokenEvent
from sessiongate.core.segments import MessageStatus, Role
from sessiongate.models.base import ReplyModel
from sessiongate.service.turn.agent_runtime import Appender
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.service.turn.model_steps import StepCut, StepResult, stream_step

#: Runs on the finished reply and returns text to append to it (seed 000's hand-off), or
#: "" for nothing; it emits its own events.
ReplyAddendum = Callable[[str, TurnHandle], Awaitable[str]]


async def stream_plain_reply(
    models: Mapping[str, ReplyModel],
    names: Sequence[str],
    context: AssembledContext,
    handle: TurnHandle,
    append: Appender,
    *,
    max_reply_chars: int,
    addendum: ReplyAddendum | None = None,
) -> None:
    try:
        step = await stream_step(
            models,
            names,
            context.to_wire(inline_tool_steps=True),
            handle,
            max_reply_chars=max_reply_chars,
        )
    except StepCut as cut:
        await keep_cut_reply(cut, handle, append)
    metadata = reply_metadata(handle, step, context)
    if step.reply.full:
        metadata["truncated"] = True
    text = step.text
    if addendum is not None and not step.reply.full:
        # After the reply streamed (its tokens were never held back), before it is kept:
        # the stored message holds what was appended.
        try:
            extra = await addendum(text, handle)
        except asyncio.CancelledError:
            # The turn was cut (timeout, shutdown) during the hand-off: the reply that
            # already reached the client is kept whole, without what was to be appended.
            await append(Role.ASSISTANT, text, {**metadata, "handoff": "cancelled"})
            raise
        if extra:
            handle.emit(TokenEvent(extra))
            metadata["appended"] = extra
            text += extra
    message = await append(Role.ASSISTANT, text, metadata)
    status = "truncated" if step.reply.full or step.stop == "length" else "complete"
    handle.emit(EndEvent(message.message_id, message.seq, step.usage.to_dict(), status))


async def keep_cut_reply(cut: StepCut, handle: TurnHandle, append: Appender) -> NoReturn:
    """Text already reached the client: keep it, marked `interrupted`, and end the turn
    with the cause (never switching model silently mid-reply)."""
    handle.status = "interrupted"
    await append(
        Role.ASSISTANT,
        cut.reply.text(),
        cut.kept_metadata(handle.turn_id),
        MessageStatus.INTERRUPTED,
    )
    if cut.error is None:
        raise asyncio.CancelledError from cut
    raise cut.error from None


def reply_metadata(
    handle: TurnHandle, step: StepResult, context: AssembledContext
) -> dict[str, Any]:
    """What a kept reply records: its turn, model (a fallback, the offline stand-in),
    usage and the context it was written from."""
    return {
        "turn_id": handle.turn_id,
        "model": step.model,
        "usage": step.usage.to_dict(),
        "context": {
            "messages": len(context.messages),
            "tokens": context.token_estimate,
            "dropped": context.dropped_messages,
        },
        **step.model_marks(),
    }
