"""Seed 000's hybrid hand-off, the shell around `core/handoff*.py`: after the reply of an
agent whose model cannot call tools has streamed, keep what it promised.

`HandoffService.for_turn` gives the turn a `ReplyAddendum` (service/turn/plain_reply.py runs
it after the last reply token, before the reply is kept). It:

1. matches the agent's patterns on the reply (no match: returns "", no event);
2. asks the control model (`handoff.model`, else the agent's `control_model`) for
   `{"tool","prompt","confidence"}` within `handoff.timeout`. A failed, late or malformed
   answer, no promise, an intent without a tool, or a confidence under
   `min_confidence`: a `handoff` event with status `skipped`, the reply as it is;
3. runs the intent's tool (`tools_primary` for the primary user, else `tools`) through
   the tool registry as the caller, with the prompt, within `handoff.tool_timeout`;
4. returns the link to what it made, the search result, or `(I could not …: why)`, and
   emits a `handoff` event `done` or `failed`.

Nothing here can fail the turn: an unexpected error is logged and the reply kept as it is.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass

from sessiongate.agents.registry import ToolRegistry, ToolResult
from sessiongate.agents.tools import ToolContext
from sessiongate.config.handoff import HandoffConfig
from sessiongate.core.events import HandoffEvent
from sessiongate.core.handoff.classification import (
    MAX_ANSWER_CHARS,
    HandoffRequest,
    classifier_messages,
    decide,
    parse_request,
)
from sessiongate.core.handoff.intents import (
    INTENTS,
    Intent,
    artifact_in,
    artifact_link,
    failure_note,
    prompt_argument,
    result_text,
    tools_for,
)
from sessiongate.core.handoff.patterns import IntentPatterns, patterns_for
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Role
from sessiongate.core.users import Caller
from sessiongate.errors import ConfigError, ModelError
from sessiongate.models.answers import answer_options, read_answer
from sessiongate.models.base import (
    ReplyModel,
)
from sessiongate.service.agents import AgentProfile
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.service.turn.plain_reply import ReplyAddendum

log = logging.getLogger("sessiongate.handoff")

#: The user's message of the turn (stage 2 reads it beside the reply).
UserMessage = Callable[[KeyRef], Awaitable[str]]


@dataclass(frozen=True, slots=True)
class AgentHandoff:
    """One agent's hand-off, checked and compiled at start-up."""

    config: HandoffConfig
    model: str
    patterns: IntentPatterns


def user_message_from(sessions: SessionService) -> UserMessage:
    """The newest user message of the key's latest segment: the turn's own, committed
    before the reply model was called."""

    async def read(ref: KeyRef) -> str:
        _, messages = await sessions.history(ref, 4)
        for message in reversed(messages):
            if message.role is Role.USER:
                return message.content
        return ""

    return read


def prepare(agent: AgentProfile, models: Mapping[str, ReplyModel]) -> AgentHandoff | None:
    """The agent's hand-off, or None when it has none; a ConfigError for one that cannot
    work, so a gateway never starts with a hand-off that silently never runs."""
    config = agent.handoff
    if config is None:
        return None
    where = f"agents.{agent.name}.handoff"
    if agent.uses_tools or agent.output_contract != "none":
        raise ConfigError(
            f"{where}: the hand-off is for agents whose model cannot call tools; this"
            " agent lists tools, a plan runner or an output contract"
        )
    model = config.model or agent.control_model
    if model is None:
        raise ConfigError(f"{where}: needs a control model: set handoff.model or control_model")
    if model not in models:
        raise ConfigError(f"{where}.model: model {model!r} is not defined in [models]")
    if config.timeout + config.tool_timeout >= agent.turn_timeout:
        raise ConfigError(
            f"{where}: timeout + tool_timeout must stay under the agent's turn_timeout"
            " (the hand-off runs inside the turn)"
        )
    intents = [i for i in INTENTS if i in config.tools or i in config.tools_primary]
    patterns = patterns_for(
        intents, config.patterns, config.replace_patterns, learned=config.learned
    )
    return AgentHandoff(config, model, patterns)


class HandoffService:
    """The `HandoffStage` of the turn service (service/turn/ports.py)."""

    def __init__(
        self,
        agents: Mapping[str, AgentProfile],
        models: Mapping[str, ReplyModel],
        tools: ToolRegistry,
        user_message: UserMessage,
    ) -> None:
        self.models = models
        self.tools = tools
        self.user_message = user_message
        self.agents: dict[str, AgentHandoff] = {}
        for name, agent in agents.items():
            prepared = prepare(agent, models)
            if prepared is not None:
                self.agents[name] = prepared

    def for_turn(self, agent: AgentProfile, caller: Caller, ref: KeyRef) -> ReplyAddendum | None:
        prepared = self.agents.get(agent.name)
        if prepared is None or agent.handoff is None:
            return None
        tools = tools_for(
            prepared.config.tools, prepared.config.tools_primary, primary=caller.primary
        )
        if not tools:
            return None

        async def addendum(reply: str, handle: TurnHandle) -> str:
            try:
                return await self.run(prepared, tools, agent, caller, ref, reply, handle)
            except (asyncio.CancelledError, KeyboardInterrupt):
                raise
            except Exception:  # a bug here must never cost the user the reply
                log.exception("handoff_crashed", extra={"agent": agent.name})
                return ""

        return addendum

    async def run(
        self,
        prepared: AgentHandoff,
        tools: Mapping[Intent, str],
        agent: AgentProfile,
        caller: Caller,
        ref: KeyRef,
        reply: str,
        handle: TurnHandle,
    ) -> str:
        # Stage 1: cheap, on every reply.
        matched = [i for i in prepared.patterns.match(reply) if i in tools]
        if not matched:
            return ""
        config = prepared.config
        # Stage 2: the control model confirms and writes the tool's prompt.
        started = time.perf_counter()
        request, failure = await self._classify(prepared, ref, reply)
        classify_ms = round((time.perf_counter() - started) * 1000)
        if request is None:
            handle.emit(HandoffEvent(matched[0], None, None, "skipped", message=failure))
            self._log(agent, matched[0], None, None, "skipped", failure, classify_ms)
            return ""
        decision = decide(request, tools, config.min_confidence)
        if not decision.act or decision.intent is None or decision.tool is None:
            why = decision.reason
            if why == "low_confidence":
                why = f"low_confidence: {request.confidence:g} < {config.min_confidence:g}"
            intent = decision.intent or matched[0]
            handle.emit(
                HandoffEvent(intent, decision.tool, request.confidence, "skipped", message=why)
            )
            self._log(agent, intent, decision.tool, request.confidence, "skipped", why, classify_ms)
            return ""
        # Stage 3: the tool, as the caller.
        intent, tool = decision.intent, decision.tool
        result = await self._call(tool, request.prompt, config, agent, caller, ref, handle)
        # Stage 4: what is appended.
        if result.status == "ok":
            artifact = result.artifact_ids[0] if result.artifact_ids else None
            if artifact is None and intent != "search":
                artifact = artifact_in(result.content)
            if artifact is not None:
                extra = artifact_link(intent, artifact)
            else:
                extra = result_text(result.content, config.max_result_chars)
            if extra:
                handle.emit(
                    HandoffEvent(intent, tool, request.confidence, "done", artifact_id=artifact)
                )
                self._log(agent, intent, tool, request.confidence, "done", None, classify_ms)
                return extra
            reason = "the tool answered nothing"
        else:
            reason = result.content.removeprefix("error:").strip() or "the tool failed"
        handle.emit(HandoffEvent(intent, tool, request.confidence, "failed", message=reason))
        self._log(agent, intent, tool, request.confidence, "failed", reason, classify_ms)
        return failure_note(intent, reason)

    async def _classify(
        self, prepared: AgentHandoff, ref: KeyRef, reply: str
    ) -> tuple[HandoffRequest | None, str]:
        """Stage 2's answer, or None and why there is none."""
        try:
            async with asyncio.timeout(prepared.config.timeout.total_seconds()):
                user = await self.user_message(ref)
                answer = await self._ask(prepared.model, classifier_messages(reply, user, INTENTS))
        except TimeoutError:
            return None, "classification_failed: timeout"
        except ModelError as exc:
            return None, f"classification_failed: {exc.code}"
        request = parse_request(answer)
        if request is None:
            return None, "classification_failed: unparseable"
        return request, ""

    async def _ask(self, name: str, messages: list[dict[str, str]]) -> str:
        model = self.models[name]
        return await read_answer(model, messages, answer_options(model), MAX_ANSWER_CHARS)

    async def _call(
        self,
        name: str,
        prompt: str,
        config: HandoffConfig,
        agent: AgentProfile,
        caller: Caller,
        ref: KeyRef,
        handle: TurnHandle,
    ) -> ToolResult:
        call_id = f"handoff-{handle.turn_id}"
        available = await self.tools.all_tools([name])
        tool = available.get(name)
        if tool is None:
            return ToolResult(call_id, name, "error", f"no tool named {name!r} is available", 0)
        argument = prompt_argument(tool.spec.parameters)
        if argument is None:
            return ToolResult(call_id, name, "error", f"the tool {name!r} takes no prompt", 0)
        context = ToolContext(
            user=caller.name,
            primary=caller.primary,
            key=ref,
            agent=agent.name,
            turn_id=handle.turn_id,
        )
        return await ToolRegistry.call(
            {name: tool},
            call_id,
            name,
            json.dumps({argument: prompt}),
            context,
            limit_seconds=config.tool_timeout.total_seconds(),
        )

    @staticmethod
    def _log(
        agent: AgentProfile,
        intent: Intent,
        tool: str | None,
        confidence: float | None,
        status: str,
        reason: str | None,
        classify_ms: int,
    ) -> None:
        # Never the reply, the prompt or the tool's answer: only what was decided.
        log.info(
            "handoff",
            extra={
                "agent": agent.name,
                "intent": intent,
                "tool": tool,
                "confidence": confidence,
                "status": status,
                "reason": reason,
                "classify_ms": classify_ms,
            },
        )
