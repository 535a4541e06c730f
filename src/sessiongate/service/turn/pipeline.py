"""Running one turn: resolve → rotate → commit the user message → assemble context →
stream the reply → commit the assistant message.

The rule for what is kept (also in docs/lifecycle.md):
- The user message is committed before any model is called, so it survives any failure.
- A reply that streams to its end is committed as a `complete` assistant message.
- A model failure before any text (after retries and fallbacks) appends no assistant
  message; the turn ends with an `error` event.
- Text that reached the client is never dropped: a turn cancelled mid-stream (shutdown,
  `TurnHandle.cancel`, `turn_timeout`), a model that fails after its first text, or a
  stream that ends without the provider's end marker keeps the text produced so far as
  an `interrupted` assistant message (nothing if no text came yet), then ends with an
  `error` event. Such a reply is never stored `complete`.
- A reply longer than `limits.max_reply_chars` is cut there, the model's stream closed,
  and the cut text kept as `complete` with `truncated: true` in its metadata.
- A client that stops listening does not cancel the turn: it runs to its end and the
  next request sees the reply.

This module starts turns and runs each one's stages in order; the stages' own rules live
beside it: rotation.py (the lifecycle), context.py (what the model sees),
reply.py (which kind of reply, and how its messages are stored) and record.py
(what is written down about the turn).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import replace
from typing import Any

from sessiongate.core.content import validate_content
from sessiongate.core.context import AssembledContext
from sessiongate.core.control import TopicJudge
from sessiongate.core.events import (
    ClassificationEvent,
    ContextTrimmedEvent,
    EndEvent,
    MemoryEvent,
    RouteEvent,
    StartEvent,
    TurnEvent,
)
from sessiongate.core.keys import KeyRef
from sessiongate.core.quotas import usage_tokens
from sessiongate.core.segments import RecallFragment, Role, RotationRecord, Segment
from sessiongate.core.summary_prompt import parse_compact_command
from sessiongate.errors import SessionGateError, TurnTimeout
from sessiongate.models.base import ReplyModel
from sessiongate.service.agent_access import AgentAccess
from sessiongate.service.agents import AgentProfile, pick_agent
from sessiongate.service.artifacts import ArtifactService
from sessiongate.service.attachments import keep_attachments
from sessiongate.service.budgets import TokenCalibration, observe_prompt_tokens
from sessiongate.service.carry_over import CarryOver
from sessiongate.service.compaction import Compactor, drain_compactions, run_compact_command
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.conversation.plan import ClientPlan
from sessiongate.service.memory import MemoryService
from sessiongate.service.quotas import QuotaService
from sessiongate.service.recall import validate_scope
from sessiongate.service.recall_rules import thread_segment_ids, validate_recall
from sessiongate.service.sessions import Caller, SessionService
from sessiongate.service.turn.after import AfterTurns
from sessiongate.service.turn.agent_runtime import AgentRuntime
from sessiongate.service.turn.context import assemble_turn_context, with_turn_input
from sessiongate.service.turn.handle import (
    AfterTurn,
    FinishedTurn,
    InboundTurn,
    RecallRequest,
    TurnHandle,
    TurnListener,
    TurnOutcome,
)
from sessiongate.service.turn.journal import TurnJournal
from sessiongate.service.turn.memory_context import (
    choose_turn_memory,
    fit_turn_memory,
    turn_memory,
)
from sessiongate.service.turn.ports import HandoffStage, Speaker
from sessiongate.service.turn.record import finished_turn, turn_outcome, user_message_metadata
from sessiongate.service.turn.reply import (
    ReplyPaths,
    ReplyTurn,
    produce_reply,
    reply_model_names,
    store_appender,
)
from sessiongate.service.turn.rotation import RotationStage, rotation_event
from sessiongate.service.turn.safety_gate import SafetyGate, UnsafeRequest
from sessiongate.service.turn.scripted_reply import ScriptedReplies
from sessiongate.service.turn.working_context import reply_within_window, uses_working_set

__all__ = [
    "FinishedTurn",
    "InboundTurn",
    "RecallRequest",
    "TurnHandle",
    "TurnOutcome",
    "TurnService",
]


class TurnService:
    def __init__(
        self,
        sessions: SessionService,
        agents: Mapping[str, AgentProfile],
        models: Mapping[str, ReplyModel],
        judges: Mapping[str, TopicJudge],
        *,
        max_reply_chars: int = 200_000,
        runtime: AgentRuntime | None = None,
        artifacts: ArtifactService | None = None,
        scripted: ScriptedReplies | None = None,
    ) -> None:
        self.sessions = sessions
        #: Keeps the images sent with turns; None: turns with attachments are refused.
        self.artifacts = artifacts
        #: Seed 004: the safety gate and the script_delimiter replies (with the sandbox).
        self.gate = SafetyGate(models)
        self.scripted = scripted or ScriptedReplies(models, None)
        #: Set by the engine when voices / hand-offs are configured.
        self.speaker: Speaker | None = None
        self.handoffs: HandoffStage | None = None
        #: Reconciles an OpenAI client's message list with the stored conversation
        #: (service/conversation/locate.py); set by the engine.
        self.conversations: ConversationService | None = None
        #: What runs after each turn, in the background (hooks, task extraction).
        self.after = AfterTurns()
        #: Runs turns of agents with tools or a plan (agents/runtime.py); None: text only.
        self.runtime = runtime
        self.max_reply_chars = max_reply_chars
        #: Per model, the token estimate's correction (service/budgets.py).
        self.calibration = TokenCalibration()
        #: The working set's summaries: read, due, written after turns.
        self.compactor = Compactor(sessions.store, models, sessions.clock, self.calibration)
        sessions.on_erase(self.compactor.forget)
        #: `carry_over = "summary"`: the previous segment's summary after a rotation.
        self.carry_over = CarryOver(self.compactor, sessions.store)
        self.agents = agents
        self.models = models
        self.judges = judges
        self.rotations = RotationStage(sessions, judges)
        self._running: set[asyncio.Task[None]] = set()
        self._listeners: list[TurnListener] = []
        #: Keeps each turn's events readable again by its owner (set by the engine).
        self.journal: TurnJournal | None = None
        #: Who may run which agent (service/agent_access.py); None: anyone, any agent
        #: (engines built without routes, as some tests and embedders do).
        self.access: AgentAccess | None = None
        #: The `memory` events extraction queued for a key since its last turn
        #: (service/memory_extraction.py), announced by the next; set by the engine.
        self.memory_news: Callable[[KeyRef], list[MemoryEvent]] | None = None
        #: The users' memory items a turn is given (service/memory.py); set by the engine.
        self.memory: MemoryService | None = None
        #: Requests per minute and tokens per day (service/quotas.py); None: no quotas.
        self.quotas: QuotaService | None = None

    def on_turn(self, listener: TurnListener) -> None:
        """Called once per finished turn (metrics, hooks)."""
        self._listeners.append(listener)

    def after_turn(self, listener: AfterTurn) -> None:
        """Run `listener` in the background after every turn (service/turn/after.py)."""
        self.after.add(listener)

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
        """Validate, then run the turn in its own task. Bad input raises here, at once,
        before anything is queued, rotated or written."""
        ref = inbound.caller.key(inbound.key, write=True)
        validate_content(inbound.content, self.sessions.max_content_chars)
        agent = self.agent(inbound.agent)
        if inbound.recall is not None:
            recall = inbound.recall
            validate_recall(recall.query, recall.rationale, recall.limit, recall.scope)
        resumed = inbound.resumes
        handle = TurnHandle(resumed.turn_id if resumed is not None else self.sessions.ids.new())
        handle.reasoning_events = inbound.reasoning_events
        if self.journal is not None:
            self.journal.register(handle, inbound.caller.name, ref.name)
        task = asyncio.get_running_loop().create_task(self._run(inbound, ref, agent, handle))
        handle.task = task
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return handle

    async def drain(self) -> None:
        """Wait until every running turn, and what runs after it, has ended (for
        graceful shutdown and tests)."""
        while self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        await self.after.drain()
        await drain_compactions(self.compactor)

    async def aclose(self) -> None:
        """Cancel running turns (their partial replies are kept as `interrupted`)."""
        for task in list(self._running):
            task.cancel()
        await asyncio.gather(*self._running, return_exceptions=True)
        await self.after.aclose()
        await self.carry_over.aclose()
        await self.compactor.aclose()

    def agent(self, name: str | None) -> AgentProfile:
        """The one agent-selection rule: the named agent, else `main`, else the first
        configured. Every transport asks here."""
        return pick_agent(dict(self.agents), name)

    async def usable_agent(self, caller: Caller, name: str | None) -> AgentProfile:
        """The agent `name` names (None: the caller's default) when the caller may run
        it; AgentNotAllowed (403) otherwise, alike whether or not it exists."""
        if self.access is None:
            return self.agent(name)
        return await self.access.check(caller, name)

    async def count_request(self, caller: Caller) -> None:
        """Count a request that runs no turn on a key (a stateless, one-shot reply)
        against the caller's quotas, as `admit` counts a turn: QuotaExceeded (429)."""
        if self.quotas is not None:
            await self.quotas.admit(caller)

    def spend_when_done(self, caller: Caller, handle: TurnHandle) -> None:
        """Add a stateless reply's usage to the caller's day once it ends, as a turn's."""
        quotas, task = self.quotas, handle.task
        if quotas is None or task is None or not quotas.counts_tokens(caller):
            return
        task.add_done_callback(lambda _: self._spend_tokens(quotas, caller, handle))

    async def admit(self, inbound: InboundTurn, *, count: bool = True) -> InboundTurn:
        """The turn with its agent chosen and found usable by its caller; raises
        AgentNotAllowed before anything is queued or written. A delegated turn (an
        `agent__<name>` tool the operator offered) is admitted by its parent. The
        request is counted against the caller's quotas here too (service/quotas.py):
        QuotaExceeded (429) before anything is queued or written. `count=False` leaves
        the quotas for later: a request with an idempotency key is counted only once it
        is known to run a turn of its own (a replayed or joined one runs nothing)."""
        if inbound.depth > 0:
            return inbound
        if not inbound.admitted and self.access is not None:
            agent = await self.access.check(inbound.caller, inbound.agent)
            inbound = replace(inbound, agent=agent.name, admitted=True)
        if count and self.quotas is not None and not inbound.counted:
            await self.quotas.admit(inbound.caller)  # over quota: 429, nothing stored
            inbound = replace(inbound, counted=True)
        return inbound

    async def offered_tools(self, agent_name: str | None, caller: Caller) -> list[dict[str, Any]]:
        """The tools `agent_name` offers this caller: name, description, parameters and
        source (`GET /v1/tools`)."""
        agent = await self.usable_agent(caller, agent_name)
        if self.runtime is None or not agent.tools:
            return []
        described = await self.runtime.describe_tools(agent, primary=caller.primary)
        return [
            {
                "name": spec.name,
                "description": spec.description,
                "parameters": dict(spec.parameters),
                "source": source,
            }
            for spec, source in described
        ]

    async def preview_context(
        self,
        key: str,
        caller: Caller,
        agent_name: str | None = None,
        *,
        owner: str | None = None,
    ) -> tuple[Segment, AssembledContext]:
        """Exactly what the next turn would send, before its own message is added, and
        the segment it comes from."""
        ref = caller.key(key, owner=owner)
        agent = await self.usable_agent(caller, agent_name)
        segment = await self.sessions.latest(key, caller, owner=owner)
        fragments = await self.carry_over.fragments(agent, segment, [])
        chosen = await choose_turn_memory(self.memory, ref, agent, None)  # pinned ones
        injected = fit_turn_memory(
            agent, chosen, ratio=1.0, fragments=fragments, client_system=(), newest=None
        )
        context = await assemble_turn_context(
            self.sessions, ref, agent, segment, fragments, compactor=self.compactor, memory=injected
        )
        return segment, context

    # -- the turn ---------------------------------------------------------------

    async def _run(
        self, inbound: InboundTurn, ref: KeyRef, agent: AgentProfile, handle: TurnHandle
    ) -> None:
        started = time.perf_counter()
        try:
            if not inbound.admitted and inbound.depth == 0 and self.access is not None:
                # A transport that did not ask first: refused here, before the key.
                await self.access.check(inbound.caller, agent.name)
            async with self.sessions.locks.hold(ref):
                # The clock starts once the turn holds its key: waiting in the key's queue
                # is not the turn's own time. On expiry the turn is cancelled where it is
                # (text so far kept as `interrupted`) and the key is released.
                limit = agent.turn_timeout.total_seconds()
                try:
                    async with asyncio.timeout(limit):
                        await self._locked_turn(inbound, ref, agent, handle)
                        if inbound.speak and handle.reply_text and self.speaker is not None:
                            await self.speaker.speak(agent, inbound, ref, handle)
                except TimeoutError:
                    error = TurnTimeout(f"the turn ran longer than its limit ({limit:g} s)")
                    handle.fail(error.code, error.message, error.status)
        except SessionGateError as exc:
            handle.fail(exc.code, exc.message, exc.status)
        except asyncio.CancelledError:
            handle.fail("turn_cancelled", "the turn was cancelled", 503)
            raise
        except Exception as exc:  # a bug must still end the stream, never hang it
            handle.fail("internal_error", f"{type(exc).__name__}: turn failed", 500)
            raise
        finally:
            handle.close()
            if self.quotas is not None and inbound.depth == 0:
                self._spend_tokens(self.quotas, inbound.caller, handle)
            self.after.schedule(finished_turn(inbound, ref, agent.name, handle))
            self._finished(turn_outcome(ref, agent.name, handle, time.perf_counter() - started))

    def _spend_tokens(self, quotas: QuotaService, caller: Caller, handle: TurnHandle) -> None:
        """Add the turn's usage to the caller's day, in the background (drained with the
        turns), when a tokens quota applies to them."""
        if not quotas.counts_tokens(caller):
            return
        tokens = sum(usage_tokens(e.usage) for e in handle.journal if isinstance(e, EndEvent))
        if tokens <= 0:
            return
        task = asyncio.get_running_loop().create_task(quotas.spend(caller, tokens))
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    async def _locked_turn(
        self, inbound: InboundTurn, ref: KeyRef, agent: AgentProfile, handle: TurnHandle
    ) -> None:
        sessions = self.sessions
        now = sessions.clock.now()
        record, segment = await sessions.open_key(ref)
        plan: ClientPlan | None = None
        if inbound.client is not None and self.conversations is not None:
            plan = await self.conversations.prepare(
                ref, record, agent, segment, inbound.client, handle, now
            )
            record, segment = plan.record, plan.segment
        # A retry answering the question its dead turn stored: only while nothing came
        # after it (an OpenAI client's list is reconciled as always instead).
        resumed = inbound.resumes if plan is None else None
        if resumed is not None and (resumed.session_id, resumed.seq) != (
            segment.session_id,
            segment.message_count,
        ):
            resumed = None
        rotations: list[RotationRecord]
        if resumed is not None:  # the question is stored: no rotation, nothing appended
            rotations, content = [], inbound.content
        elif plan is None or plan.run_rotation_stage:
            segment, rotations, content = await self.rotations.rotate(
                ref, record, agent, segment, inbound.content, now
            )
        else:  # nothing new from the user (tool results, a regenerate), or a fork
            rotations, content = list(plan.rotations), inbound.content

        handle.emit(StartEvent(record.key, segment.session_id, handle.turn_id))
        if inbound.route is not None:
            handle.emit(RouteEvent(**inbound.route.to_event_fields()))
        handle.session_id = segment.session_id
        for rotation in rotations:
            event = rotation_event(rotation)
            handle.rotations.append({k: v for k, v in event.to_dict().items() if k != "type"})
            handle.emit(event)
        instructions = parse_compact_command(content)
        if instructions is not None:  # `/compact [instructions]`: the whole turn
            handle.emit(await run_compact_command(self.compactor, agent, segment, instructions))
        if not content or instructions is not None:  # a bare `/new`, or `/compact`
            handle.emit(EndEvent(None, segment.message_count))
            return

        verdict = None
        if agent.classifier is not None:
            verdict = await self.gate.classify(agent.classifier, content)
            verdict_of = verdict.classification
            handle.emit(
                ClassificationEvent(
                    verdict_of.label.value,
                    verdict_of.marker,
                    verdict_of.confidence,
                    verdict_of.deciding_model,
                )
            )
        fragments: list[RecallFragment] = []
        if inbound.recall is not None:
            fragments = await sessions.recall_search.search(
                ref,
                inbound.recall.query,
                rationale=inbound.recall.rationale.strip(),
                limit=inbound.recall.limit,
                scope=validate_scope(inbound.recall.scope),
                exclude_session_ids=thread_segment_ids(segment),
            )
        carried = await self.carry_over.fragments(agent, segment, rotations, handle.emit)
        fragments = [*carried, *fragments]
        user_metadata = user_message_metadata(
            inbound, handle.turn_id, agent.name, rotations, fragments, verdict, plan
        )
        ratio = self.calibration.ratio(inbound.reply_model or agent.reply_model)
        injected = (
            []
            if verdict is not None and verdict.unsafe
            else await turn_memory(self.memory, ref, agent, content, fragments, plan, ratio)
        )
        if injected:  # what the model is given of the user's memory, and why (§13)
            user_metadata["memory"] = [item.metadata() for item in injected]
        append_user = (plan is None or plan.append_user) and resumed is None
        if inbound.attachments and append_user:
            user_metadata["attachments"] = await keep_attachments(
                self.artifacts, ref.owner, ref.name, handle.turn_id, inbound.attachments
            )
        if append_user:
            message = await sessions.append_message(
                ref,
                segment.session_id,
                role=Role.USER,
                content=content,
                now=now,
                metadata=user_metadata,
            )
            if plan is not None:
                await plan.user_appended(message)
            # The segment as the store now has it, without reading it back.
            segment = replace(
                segment,
                message_count=message.seq,
                last_activity_at=max(segment.last_activity_at, message.created_at),
            )
        if verdict is not None and verdict.unsafe:
            # Kept (who asked what is part of the record) but never answered, and left
            # out of every later context (seed 004: unsafe turns add no memory).
            raise UnsafeRequest("the request was classified unsafe; nothing was run")
        context = await assemble_turn_context(
            sessions, ref, agent, segment, fragments, plan, ratio, self.compactor, injected
        )
        for news in self.compactor.news(segment.session_id):
            handle.emit(news)
        if self.memory_news is not None:
            for memory in self.memory_news(ref):
                handle.emit(memory)
        if context.dropped_messages:  # never silently (docs/working_set.md)
            handle.emit(ContextTrimmedEvent(context.dropped_messages, "budget"))
        handle.context_ready.set()
        context = with_turn_input(self.models, agent, inbound, context, content, verdict)

        async def reply(context: AssembledContext) -> None:
            await produce_reply(
                self._reply_paths(),
                ReplyTurn(
                    ref=ref,
                    agent=agent,
                    session_id=segment.session_id,
                    context=context,
                    handle=handle,
                    inbound=inbound,
                    content=content,
                    model_names=reply_model_names(inbound, record, agent),
                    append=store_appender(sessions, ref, segment.session_id, handle, plan),
                    verdict=verdict,
                ),
            )

        async def refit(scale: float) -> AssembledContext:
            smaller = await assemble_turn_context(
                sessions,
                ref,
                agent,
                segment,
                fragments,
                plan,
                ratio * scale,
                self.compactor,
                injected,
            )
            return with_turn_input(self.models, agent, inbound, smaller, content, verdict)

        fitted = uses_working_set(agent.working_set, agent.token_budget, agent.context_budget)
        context = await reply_within_window(reply, refit, context, handle, fitted=fitted)
        self.compactor.after_turn(segment.session_id)
        observe_prompt_tokens(
            self.calibration, handle.model, handle.journal, context.token_estimate
        )

    def _reply_paths(self) -> ReplyPaths:
        return ReplyPaths(
            models=self.models,
            scripted=self.scripted,
            runtime=self.runtime,
            handoffs=self.handoffs,
            max_reply_chars=self.max_reply_chars,
        )
