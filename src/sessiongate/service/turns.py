"""Running one turn: resolve → rotate → commit the user message → assemble context →
stream the reply → commit the assistant message.

The rule for what is kept (also in docs/lifecycle.md):
- The user message is committed before any model is called, so it survives any failure.
- A reply that streams to its end is committed as a `complete` assistant message.
- A model failure (after retries and fallbacks) appends no assistant message; the turn
  ends with an `error` event.
- A turn cancelled mid-stream (shutdown, `TurnHandle.cancel`) keeps the text produced so
  far as an `interrupted` assistant message, or nothing if no text came yet.
- A client that stops listening does not cancel the turn: it runs to its end and the
  next request sees the reply.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sessiongate.core.content import validate_content
from sessiongate.core.context import AssembledContext, assemble_context
from sessiongate.core.control import TopicJudge, resolve_control_chain
from sessiongate.core.events import (
    EndEvent,
    RotationEvent,
    StartEvent,
    TokenEvent,
    TurnEvent,
)
from sessiongate.core.keys import validate_session_key
from sessiongate.core.rotation import (
    LifecycleAction,
    LifecyclePolicy,
    manual_action,
    parse_new_command,
    semantic_action,
    semantic_eligible,
    temporal_action,
)
from sessiongate.core.segments import (
    MessageStatus,
    RecallFragment,
    Role,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.errors import ModelError, SessionGateError
from sessiongate.models.base import ReplyModel, TextDelta, Usage
from sessiongate.service.agents import AgentProfile, pick_agent
from sessiongate.service.sessions import (
    Caller,
    SessionService,
    thread_segment_ids,
    validate_recall,
)
from sessiongate.service.turn_handle import (
    InboundTurn,
    RecallRequest,
    TurnHandle,
    TurnListener,
    TurnOutcome,
)

__all__ = ["InboundTurn", "RecallRequest", "TurnHandle", "TurnOutcome", "TurnService"]

#: How many recent messages the control model sees when judging a topic shift.
JUDGE_WINDOW = 6


class TurnService:
    def __init__(
        self,
        sessions: SessionService,
        agents: Mapping[str, AgentProfile],
        models: Mapping[str, ReplyModel],
        judges: Mapping[str, TopicJudge],
    ) -> None:
        self.sessions = sessions
        self.agents = agents
        self.models = models
        self.judges = judges
        self._running: set[asyncio.Task[None]] = set()
        self._listeners: list[TurnListener] = []

    def on_turn(self, listener: TurnListener) -> None:
        """Called once per finished turn (metrics, hooks)."""
        self._listeners.append(listener)

    def _finished(self, outcome: TurnOutcome) -> None:
        for listener in self._listeners:
            listener(outcome)

    # -- public -----------------------------------------------------------------

    async def run_turn(self, inbound: InboundTurn) -> AsyncIterator[TurnEvent]:
        """Start a turn and yield its events until `end` or `error`."""
        handle = self.start_turn(inbound)
        async for event in handle.events():
            yield event

    def start_turn(self, inbound: InboundTurn) -> TurnHandle:
        """Validate, then run the turn in its own task. Bad input raises here, at once."""
        validate_session_key(inbound.key)
        validate_content(inbound.content, self.sessions.max_content_chars)
        agent = pick_agent(dict(self.agents), inbound.agent)
        if inbound.recall is not None:
            validate_recall(inbound.recall.query, inbound.recall.rationale, inbound.recall.limit)
        handle = TurnHandle(self.sessions.ids.new())
        task = asyncio.get_running_loop().create_task(self._run(inbound, agent, handle))
        handle.task = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return handle

    async def drain(self) -> None:
        """Wait until every running turn has ended (for graceful shutdown and tests)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    async def aclose(self) -> None:
        """Cancel running turns (their partial replies are kept as `interrupted`)."""
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)

    async def preview_context(
        self, key: str, caller: Caller, agent_name: str | None = None
    ) -> AssembledContext:
        """Exactly what the next turn would send, before its own message is added."""
        record = await self.sessions.owned_key(key, caller, write=False)
        agent = pick_agent(dict(self.agents), agent_name)
        segment = await self.sessions.store.latest_segment(record.key)
        return await self._assemble(record.key, agent, segment, ())

    # -- the turn ---------------------------------------------------------------

    async def _run(self, inbound: InboundTurn, agent: AgentProfile, handle: TurnHandle) -> None:
        started = time.perf_counter()
        try:
            async with self.sessions.locks.hold(inbound.key):
                await self._locked_turn(inbound, agent, handle)
        except SessionGateError as exc:
            handle.fail(exc.code, exc.message)
        except asyncio.CancelledError:
            handle.fail("turn_cancelled", "the turn was cancelled")
            raise
        except Exception as exc:  # a bug must still end the stream, never hang it
            handle.fail("internal_error", f"{type(exc).__name__}: turn failed")
            raise
        finally:
            handle.close()
            self._finished(
                TurnOutcome(
                    agent=agent.name,
                    status=handle.status,
                    seconds=time.perf_counter() - started,
                    key=inbound.key,
                    turn_id=handle.turn_id,
                    model=handle.model,
                    first_token_seconds=handle.first_token_seconds,
                    error_code=handle.error_code,
                )
            )

    async def _locked_turn(
        self, inbound: InboundTurn, agent: AgentProfile, handle: TurnHandle
    ) -> None:
        sessions = self.sessions
        now = sessions.clock.now()
        record, segment = await sessions.open_key(inbound.key, inbound.caller)
        content = inbound.content
        rotations: list[RotationRecord] = []

        policy = sessions.policy_for(record)
        command = parse_new_command(content)
        if command is not None:
            segment, rotation = await sessions.apply(
                record.key, segment, manual_action(policy), now
            )
            rotations.append(rotation)
            content = command.rest
        else:
            action = temporal_action(segment, now, policy)
            if action is None:
                action = await self._semantic_decision(record, agent, segment, content, now, policy)
            if action is not None:
                segment, rotation = await sessions.apply(record.key, segment, action, now)
                rotations.append(rotation)

        handle.emit(StartEvent(record.key, segment.session_id, handle.turn_id))
        for rotation in rotations:
            handle.emit(_rotation_event(rotation))
        if not content:  # a bare `/new`: the rotation was the whole turn
            handle.emit(EndEvent(None, segment.message_count))
            return

        fragments: list[RecallFragment] = []
        if inbound.recall is not None:
            fragments = await sessions.store.recall(
                record.key,
                inbound.recall.query,
                rationale=inbound.recall.rationale.strip(),
                limit=inbound.recall.limit,
                exclude_session_ids=thread_segment_ids(segment),
            )
        user_metadata: dict[str, Any] = {**inbound.metadata, "turn_id": handle.turn_id}
        user_metadata["agent"] = agent.name
        if rotations:
            user_metadata["rotation"] = rotations[-1].reason.value
        if fragments:
            user_metadata["recall"] = [
                {
                    "session_id": f.session_id,
                    "message_id": f.message_id,
                    "score": f.score,
                    "rationale": f.rationale,
                }
                for f in fragments
            ]
        message = await sessions.append_message(
            record.key,
            segment.session_id,
            role=Role.USER,
            content=content,
            now=now,
            metadata=user_metadata,
        )
        # The segment as the store now has it, without reading it back.
        segment = replace(
            segment,
            message_count=message.seq,
            last_activity_at=max(segment.last_activity_at, message.created_at),
        )
        context = await self._assemble(record.key, agent, segment, fragments)
        await self._reply(record, agent, segment, context, handle)

    async def _semantic_decision(
        self,
        record: SessionKeyRecord,
        agent: AgentProfile,
        segment: Segment,
        content: str,
        now: datetime,
        policy: LifecyclePolicy,
    ) -> LifecycleAction | None:
        if not semantic_eligible(segment, now, policy, record.last_semantic_rotation_at):
            return None
        # The reply model is deliberately not consulted here (lifecycle contract §5).
        chain = resolve_control_chain(
            record.overrides.get("control_model"),
            agent.control_model,
            agent.control_fallback_models,
        )
        tail = await self.sessions.thread_tail(record.key, segment, JUDGE_WINDOW, remember=False)
        recent = [m.content for m in tail]
        for candidate in chain:
            judge = self.judges.get(candidate.model)
            if judge is None:
                continue
            try:
                confidence = await judge.judge_topic_shift(recent, content)
            except ModelError:
                continue  # the next link of the chain decides
            return semantic_action(
                confidence, judge.name, segment, now, policy, record.last_semantic_rotation_at
            )
        return None

    async def _assemble(
        self,
        key: str,
        agent: AgentProfile,
        segment: Segment,
        fragments: Sequence[RecallFragment],
    ) -> AssembledContext:
        thread = await self.sessions.thread_tail(key, segment, agent.memory_window)
        return assemble_context(
            thread=thread,
            memory_window=agent.memory_window,
            system_prompt=agent.system_prompt,
            context_files=agent.context_files,
            recalled=fragments,
            token_budget=agent.token_budget,
        )

    async def _reply(
        self,
        record: SessionKeyRecord,
        agent: AgentProfile,
        segment: Segment,
        context: AssembledContext,
        handle: TurnHandle,
    ) -> None:
        sessions = self.sessions
        override = record.overrides.get("reply_model")
        names = [override or agent.reply_model, *agent.fallback_models]
        wire = context.to_wire()
        last_error: ModelError | None = None
        for name in dict.fromkeys(names):
            model = self.models.get(name)
            if model is None:
                last_error = ModelError(f"model {name!r} is not configured", code="model_missing")
                continue
            parts: list[str] = []
            usage = Usage()
            handle.model = name
            asked = time.perf_counter()
            try:
                async for chunk in model.stream(wire):
                    if isinstance(chunk, TextDelta):
                        if chunk.text:
                            first = not parts
                            if first:
                                handle.first_token_seconds = time.perf_counter() - asked
                            parts.append(chunk.text)
                            handle.emit(TokenEvent(chunk.text))
                            if first:
                                # Let the transport send the first token now, even when
                                # the rest of the reply is already buffered.
                                await asyncio.sleep(0)
                    else:
                        usage = chunk
            except ModelError as exc:
                last_error = exc
                if parts:  # text already reached the client: no silent switch of model
                    break
                continue
            except asyncio.CancelledError:
                if parts:
                    handle.status = "interrupted"
                    await sessions.append_message(
                        record.key,
                        segment.session_id,
                        role=Role.ASSISTANT,
                        content="".join(parts),
                        now=self.sessions.clock.now(),
                        status=MessageStatus.INTERRUPTED,
                        metadata={"turn_id": handle.turn_id, "model": name},
                    )
                raise
            message = await sessions.append_message(
                record.key,
                segment.session_id,
                role=Role.ASSISTANT,
                content="".join(parts),
                now=self.sessions.clock.now(),
                metadata={
                    "turn_id": handle.turn_id,
                    "model": name,
                    "usage": usage.to_dict(),
                    "context": {
                        "messages": len(context.messages),
                        "tokens": context.token_estimate,
                        "dropped": context.dropped_messages,
                    },
                },
            )
            handle.emit(EndEvent(message.message_id, message.seq, usage.to_dict()))
            return
        assert last_error is not None
        handle.fail(last_error.code, last_error.message)


def _rotation_event(record: RotationRecord) -> RotationEvent:
    return RotationEvent(
        from_session_id=record.from_session_id,
        to_session_id=record.to_session_id,
        reason=record.reason.value,
        confidence=record.confidence,
        deciding_model=record.deciding_model,
        in_place=record.in_place,
    )
