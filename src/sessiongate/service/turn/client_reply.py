"""Replies shaped by what an OpenAI-compatible client asked for (DESIGN.md §11).

- `run_client_reply`: a turn whose request carries its own `tools`, `tool_choice` or
  `response_format`. One model call with exactly those; the gateway never runs the
  client's tools: the model's calls are kept as the assistant message's `tool_calls`
  (`client_tools: true`) and go back to the client (`TurnHandle.tool_calls`), whose
  `tool` results arrive with its next request. The agent's own tools are not offered in
  such a turn.
- `start_stateless`: an agent with `history = "none"`, or a one-shot task request (Open
  WebUI's title generation): the client's list is the whole context and nothing is kept.

Text that reached the client is never dropped: a model that fails (or a turn cancelled)
after output keeps it as an `interrupted` assistant message, as every reply does.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from sessiongate.core.context import AssembledContext, is_stand_in_text
from sessiongate.core.events import EndEvent
from sessiongate.core.segments import Role
from sessiongate.core.tool_calls import ToolCallRecord
from sessiongate.errors import SessionGateError, TurnTimeout
from sessiongate.models.base import (
    NO_OPTIONS,
    ModelOptions,
    ReplyModel,
    ToolCallChunk,
    capabilities_of,
    text_of,
)
from sessiongate.service.agents import AgentProfile
from sessiongate.service.turn.agent_runtime import Appender
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.service.turn.model_steps import StepCut, stream_step
from sessiongate.service.turn.plain_reply import keep_cut_reply, reply_metadata

#: Assistant-message metadata: its `tool_calls` are the client's to run.
CLIENT_TOOLS = "client_tools"


def client_call_records(calls: Sequence[ToolCallChunk], turn_id: str) -> list[ToolCallRecord]:
    """The calls with ids a client can answer: a missing or repeated id gets one made
    from the turn."""
    seen: set[str] = set()
    records = []
    for index, call in enumerate(calls, start=1):
        call_id = call.call_id
        if not call_id or call_id in seen or len(call_id) > 64:
            call_id = f"call_{turn_id[-12:]}_{index}"
        seen.add(call_id)
        records.append(ToolCallRecord(call_id, call.name, call.arguments))
    return records


def usable_options(options: ModelOptions, model: ReplyModel | None) -> ModelOptions:
    """The options the first model of the chain can take: no tools for a model that
    cannot call them (it answers in text instead)."""
    if options.tools and not capabilities_of(model).tools:
        return replace(options, tools=(), tool_choice=None)
    return options


async def run_client_reply(
    models: Mapping[str, ReplyModel],
    names: Sequence[str],
    context: AssembledContext,
    handle: TurnHandle,
    append: Appender,
    options: ModelOptions,
    *,
    max_reply_chars: int,
) -> None:
    options = usable_options(options, models.get(names[0]) if names else None)
    wire = context.to_wire(inline_tool_steps=not options.tools)
    try:
        step = await stream_step(
            models, names, wire, handle, max_reply_chars=max_reply_chars, options=options
        )
    except StepCut as cut:
        await keep_cut_reply(cut, handle, append)
    metadata = reply_metadata(handle, step, context)
    if options.response_format is not None:
        metadata["response_format"] = str(options.response_format.get("type", ""))
    if step.reply.full:
        metadata["truncated"] = True
    if step.calls and options.tools:
        records = client_call_records(step.calls, handle.turn_id)
        metadata["tool_calls"] = [r.to_metadata() for r in records]
        metadata[CLIENT_TOOLS] = True
        handle.tool_calls = [r.to_metadata() for r in records]
    message = await append(Role.ASSISTANT, step.text, metadata)
    status = "truncated" if step.reply.full or step.stop == "length" else "complete"
    handle.emit(EndEvent(message.message_id, message.seq, step.usage.to_dict(), status))


def stateless_wire(
    agent: AgentProfile, system: Sequence[str], messages: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The agent's system text, then the client's, then the client's messages (without
    the offline stand-in's answers it shows: no model reads those, core/context.py)."""
    wire: list[dict[str, Any]] = []
    if agent.system_prompt:
        wire.append({"role": "system", "content": agent.system_prompt})
    for item in agent.context_files:
        wire.append({"role": "system", "content": item.content})
    wire.extend({"role": "system", "content": text} for text in system)
    wire.extend(dict(m) for m in messages if not _stand_in_answer(m))
    return wire


def _stand_in_answer(message: Mapping[str, Any]) -> bool:
    return message.get("role") == "assistant" and is_stand_in_text(text_of(message.get("content")))


class StatelessReplies:
    """Runs one-shot replies in tasks of their own, so shutdown can wait for them."""

    def __init__(self, models: Mapping[str, ReplyModel], max_reply_chars: int) -> None:
        self.models = models
        self.max_reply_chars = max_reply_chars
        self._running: set[asyncio.Task[None]] = set()

    def start(
        self,
        turn_id: str,
        agent: AgentProfile,
        wire: list[dict[str, Any]],
        options: ModelOptions | None,
    ) -> TurnHandle:
        handle = TurnHandle(turn_id)
        handle.context_ready.set()  # the client's list is the context: nothing to wait for
        task = asyncio.get_running_loop().create_task(self._run(handle, agent, wire, options))
        handle.task = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return handle

    async def _run(
        self,
        handle: TurnHandle,
        agent: AgentProfile,
        wire: list[dict[str, Any]],
        options: ModelOptions | None,
    ) -> None:
        names = [agent.reply_model, *agent.fallback_models]
        chosen = (
            NO_OPTIONS if options is None else usable_options(options, self.models.get(names[0]))
        )
        limit = agent.turn_timeout.total_seconds()
        try:
            async with asyncio.timeout(limit):
                step = await stream_step(
                    self.models,
                    names,
                    wire,
                    handle,
                    max_reply_chars=self.max_reply_chars,
                    options=chosen,
                )
            if step.calls and chosen.tools:
                records = client_call_records(step.calls, handle.turn_id)
                handle.tool_calls = [r.to_metadata() for r in records]
            handle.reply_text = step.text
            status = "truncated" if step.reply.full or step.stop == "length" else "complete"
            handle.emit(EndEvent(None, 0, step.usage.to_dict(), status))
        except StepCut as cut:
            error = cut.error
            if error is None:
                handle.fail("turn_cancelled", "the turn was cancelled", 503)
            else:
                handle.fail(error.code, error.message, error.status)
        except TimeoutError:
            timeout = TurnTimeout(f"the turn ran longer than its limit ({limit:g} s)")
            handle.fail(timeout.code, timeout.message, timeout.status)
        except SessionGateError as exc:
            handle.fail(exc.code, exc.message, exc.status)
        except asyncio.CancelledError:
            handle.fail("turn_cancelled", "the turn was cancelled", 503)
            raise
        finally:
            handle.close()

    async def drain(self) -> None:
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def aclose(self) -> None:
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
