"""How one turn's reply is produced, by kind, once its context is assembled:

- an OpenAI client's own tools or response format: one call with exactly those
  (service/turn/client_reply.py);
- a `script_delimiter` agent: seed 004's script and spoken answer (service/turn/scripted_reply.py);
- an agent with tools or a plan: the agent runtime (agents/runtime.py);
- otherwise plain streamed text, with seed 000's hand-off addendum when configured
  (service/turn/plain_reply.py).

Every kind stores its messages through the one appender built here, so what is kept
(and how an OpenAI client's plan marks it) does not depend on the kind."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sessiongate.core.context import AssembledContext
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, MessageStatus, Role, SessionKeyRecord
from sessiongate.models.base import ReplyModel
from sessiongate.service.agents import AgentProfile
from sessiongate.service.conversation.plan import ClientPlan
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.agent_runtime import AgentRuntime, AgentTurn, Appender
from sessiongate.service.turn.client_reply import run_client_reply
from sessiongate.service.turn.handle import InboundTurn, TurnHandle
from sessiongate.service.turn.plain_reply import stream_plain_reply
from sessiongate.service.turn.ports import HandoffStage
from sessiongate.service.turn.safety_gate import Verdict
from sessiongate.service.turn.scripted_reply import (
    ScriptedReplies,
    ScriptedTurn,
    with_contract_prompt,
)


@dataclass(frozen=True, slots=True)
class ReplyPaths:
    """What the reply kinds run on. Taken from the turn service for each turn, because
    the engine wires some of it (hand-offs) after the service is built."""

    models: Mapping[str, ReplyModel]
    scripted: ScriptedReplies
    runtime: AgentRuntime | None
    handoffs: HandoffStage | None
    max_reply_chars: int


@dataclass(frozen=True, slots=True)
class ReplyTurn:
    """One turn at the point its reply is due: the user message is stored, the
    context is final."""

    ref: KeyRef
    agent: AgentProfile
    session_id: str
    context: AssembledContext
    handle: TurnHandle
    inbound: InboundTurn
    #: The user's text after the rotation stage (a leading `/new` taken off).
    content: str
    #: The reply model, then its fallbacks, in the order they are tried.
    model_names: list[str]
    append: Appender
    verdict: Verdict | None = None


def reply_model_names(
    inbound: InboundTurn, record: SessionKeyRecord, agent: AgentProfile
) -> list[str]:
    """The models to try: the turn's own choice, else the session's override, else the
    agent's model; then the agent's fallbacks. A stored override counts only where this
    turn's agent lists the model (an import or another agent's key may hold any name):
    naming a model never reaches more than the agent gives."""
    stored = record.overrides.get("reply_model")
    if stored not in agent.listed_models:
        stored = None
    override = inbound.reply_model or stored
    return [override or agent.reply_model, *agent.fallback_models]


def _agent_turn(paths: ReplyPaths, turn: ReplyTurn) -> AgentTurn:
    """The turn as the agent runtime runs it (with tools, or hosted tools)."""
    return AgentTurn(
        ref=turn.ref,
        session_id=turn.session_id,
        agent=turn.agent,
        handle=turn.handle,
        context=turn.context,
        model_names=turn.model_names,
        caller=turn.inbound.caller,
        content=turn.content,
        depth=turn.inbound.depth,
        max_reply_chars=paths.max_reply_chars,
        append=turn.append,
    )


async def produce_reply(paths: ReplyPaths, turn: ReplyTurn) -> None:
    """Run the one reply kind that fits the turn (the module docstring gives the order)."""
    handle, agent = turn.handle, turn.agent
    client_options = None if turn.inbound.client is None else turn.inbound.client.options
    if client_options is not None and turn.inbound.hosted_tools and paths.runtime is not None:
        await paths.runtime.run_hosted(
            _agent_turn(paths, turn),
            client_options,
            turn.inbound.hosted_tools,
        )
        return
    if client_options is not None:
        await run_client_reply(
            paths.models,
            turn.model_names,
            turn.context,
            handle,
            turn.append,
            client_options,
            max_reply_chars=paths.max_reply_chars,
        )
        return
    if agent.output_contract == "script_delimiter":
        verdict = turn.verdict
        marks: dict[str, Any] = {"turn_id": handle.turn_id}
        if verdict is not None:
            marks["classification"] = verdict.classification.label.value
        await paths.scripted.run(
            ScriptedTurn(
                agent=agent,
                handle=handle,
                wire=with_contract_prompt(turn.context.to_wire(inline_tool_steps=True)),
                model_names=turn.model_names,
                label=verdict.classification.label if verdict is not None else None,
                append=turn.append,
                max_reply_chars=paths.max_reply_chars,
                metadata=marks,
            )
        )
        return
    if agent.uses_tools and paths.runtime is not None:
        await paths.runtime.run(_agent_turn(paths, turn))
        return
    handoff = None
    if paths.handoffs is not None:
        handoff = paths.handoffs.for_turn(agent, turn.inbound.caller, turn.ref)
    await stream_plain_reply(
        paths.models,
        turn.model_names,
        turn.context,
        handle,
        turn.append,
        max_reply_chars=paths.max_reply_chars,
        addendum=handoff,
    )


def store_appender(
    sessions: SessionService,
    ref: KeyRef,
    session_id: str,
    handle: TurnHandle,
    plan: ClientPlan | None = None,
) -> Appender:
    """Stores each message a reply kind produces in the turn's segment; the last
    assistant message becomes the handle's reply text (what hooks and speech see)."""

    async def append(
        role: Role,
        content: str,
        metadata: dict[str, Any],
        status: MessageStatus = MessageStatus.COMPLETE,
    ) -> Message:
        if role is Role.ASSISTANT:
            handle.reply_text = content  # the last one is the reply
        if plan is not None:
            metadata = plan.reply_metadata(role, metadata)
        message = await sessions.append_message(
            ref,
            session_id,
            role=role,
            content=content,
            now=sessions.clock.now(),
            status=status,
            metadata=metadata,
        )
        if plan is not None:
            await plan.appended(message, handle)
        return message

    return append
