"""What one turn sends to the model: the tail of its segment's thread within the agent's
memory window (turns classified unsafe left out), recalled fragments, the agent's
prompt and files, an OpenAI client's system text, the user's memory items; then the
turn's own images, or a script_delimiter agent's safety marker, in place of its plain
text on the wire.

The rules themselves are pure (core/context.py, core/attachments.py); this module reads
the thread they apply to."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from sessiongate.core.attachments import turn_parts
from sessiongate.core.context import AssembledContext, assemble_context
from sessiongate.core.keys import KeyRef
from sessiongate.core.memory import Injected
from sessiongate.core.segments import RecallFragment, Segment
from sessiongate.models.base import ReplyModel, capabilities_of
from sessiongate.service.agents import AgentProfile
from sessiongate.service.compaction import Compactor
from sessiongate.service.conversation.plan import ClientPlan
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.handle import InboundTurn
from sessiongate.service.turn.memory_context import memory_block
from sessiongate.service.turn.safety_gate import Verdict, leave_out_unsafe
from sessiongate.service.turn.working_context import fit_turn_context, uses_working_set


async def assemble_turn_context(
    sessions: SessionService,
    key: KeyRef,
    agent: AgentProfile,
    segment: Segment,
    fragments: Sequence[RecallFragment],
    plan: ClientPlan | None = None,
    ratio: float = 1.0,
    compactor: Compactor | None = None,
    memory: Sequence[Injected] = (),
) -> AssembledContext:
    """The context from what is stored: used for a turn, and for the preview of the
    next one (`GET /v1/sessions/{key}/context`). `ratio`: the reply model's correction
    of the token estimate (service/budgets.py); `compactor`: the summaries in force
    (service/compaction.py); `memory`: the memory items of the turn, already fitted to
    the budget (service/turn/memory_context.py), entering as one system message."""
    thread = await sessions.thread_tail(key, segment, agent.memory_window)
    if agent.classifier is not None:
        thread = leave_out_unsafe(thread)
    context = assemble_context(
        thread=thread,
        memory_window=agent.memory_window,
        system_prompt=agent.system_prompt,
        context_files=agent.context_files,
        recalled=fragments,
        token_budget=agent.token_budget,
        max_tool_result_chars=agent.max_tool_result_chars,
        client_system=None if plan is None else plan.turn.system,
        leave_out=() if plan is None else plan.superseded,
        memory_block=memory_block(memory),
    )
    if memory:
        context = replace(context, memory=tuple(item.metadata() for item in memory))
    budget = agent.context_budget
    if budget is not None and uses_working_set(agent.working_set, agent.token_budget, budget):
        context = await fit_turn_context(
            context,
            thread,
            agent=agent,
            segment=segment,
            budget=budget,
            ratio=ratio,
            compactor=compactor,
        )
    return context


def with_turn_input(
    models: Mapping[str, ReplyModel],
    agent: AgentProfile,
    inbound: InboundTurn,
    context: AssembledContext,
    content: str,
    verdict: Verdict | None,
) -> AssembledContext:
    """The turn's images, and for script_delimiter agents the safety marker (seed
    004 gives the reply model both), in place of its plain text on the wire."""
    lead = ""
    if verdict is not None and agent.output_contract == "script_delimiter":
        lead = verdict.classification.marker
    if not lead and not inbound.attachments:
        return context
    # The first model to be tried decides whether images go as images or as a note.
    first = models.get(inbound.reply_model or agent.reply_model)
    parts = turn_parts(
        content, inbound.attachments, lead=lead, vision=capabilities_of(first).images
    )
    return replace(context, current_parts=parts)
