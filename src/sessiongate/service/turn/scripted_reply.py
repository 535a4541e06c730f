"""Seed 004's reply shape: a script, `---DELIMITER---`, then the answer to speak.

The reply is collected whole before anything reaches the client (the script is not for
the user to read, and a reply that breaks the contract must not be half-spoken). Then:
- a violation ends the turn with `output_contract_violation` and the spoken fallback,
  and no assistant message is kept (seed 004: failed parses add no assistant memory);
- a valid reply labelled AGENT hands its script to the agent's `actions`: `client` sends
  an `action` event, `sandbox` runs it and sends `action_result`; with CHAT, or `off`,
  the script never runs;
- the answer is sent as the reply and kept as the assistant message, the script (and how
  it ran) in its metadata. A script that failed makes the spoken answer say so, and that
  is what is kept: memory holds what the user heard.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiongate.actions.sandbox import ActionResult, ScriptRunner
from sessiongate.core.events import (
    ActionEvent,
    ActionResultEvent,
    EndEvent,
    TokenEvent,
)
from sessiongate.core.output_contract import (
    FALLBACK_ANSWER,
    SCRIPT_CONTRACT_PROMPT,
    ContractViolation,
    parse_script_reply,
)
from sessiongate.core.safety.gate import Label
from sessiongate.core.segments import Role
from sessiongate.errors import SessionGateError
from sessiongate.models.base import ReplyModel
from sessiongate.service.agents import AgentProfile
from sessiongate.service.turn.agent_runtime import Appender
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.service.turn.model_steps import StepCut, stream_step

SCRIPT_LANGUAGE = "python"


class OutputContractViolation(SessionGateError):
    code = "output_contract_violation"
    status = 502


@dataclass(frozen=True, slots=True)
class ScriptedTurn:
    agent: AgentProfile
    handle: TurnHandle
    wire: list[dict[str, Any]]
    model_names: Sequence[str]
    #: The safety gate's label (None: the agent has no gate; its scripts then never run).
    label: Label | None
    append: Appender
    max_reply_chars: int
    metadata: dict[str, Any]


class ScriptedReplies:
    def __init__(self, models: Mapping[str, ReplyModel], runner: ScriptRunner | None) -> None:
        self.models = models
        #: The sandbox; None when no agent runs scripts on the gateway host.
        self.runner = runner

    async def run(self, turn: ScriptedTurn) -> None:
        handle = turn.handle
        try:
            step = await stream_step(
                self.models,
                turn.model_names,
                turn.wire,
                handle,
                max_reply_chars=turn.max_reply_chars,
                emit_tokens=False,
            )
        except StepCut as cut:
            # Nothing reached the client (tokens are held back): a cut reply is simply a
            # failed one, and nothing is kept.
            if cut.error is None:
                raise asyncio.CancelledError from cut
            raise cut.error from None
        parsed = parse_script_reply(step.text)
        if isinstance(parsed, ContractViolation):
            handle.emit(TokenEvent(FALLBACK_ANSWER))
            raise OutputContractViolation(
                f"the reply broke the script_delimiter contract ({parsed.reason}): {parsed.message}"
            )
        metadata: dict[str, Any] = {
            **turn.metadata,
            "model": step.model,
            "usage": step.usage.to_dict(),
            "script": parsed.script,
            **step.model_marks(),
        }
        spoken = parsed.answer
        result = await self._act(turn, parsed.script)
        if result is not None:
            metadata["action"] = result.to_dict()
            if result.exit_code != 0:
                metadata["planned_answer"] = parsed.answer
                spoken = _failure_answer(result)
        elif turn.label is Label.AGENT and parsed.script and turn.agent.actions == "client":
            metadata["action"] = {"sent_to": "client"}
        message = await turn.append(Role.ASSISTANT, spoken, metadata)
        handle.emit(TokenEvent(spoken))
        handle.emit(EndEvent(message.message_id, message.seq, step.usage.to_dict()))

    async def _act(self, turn: ScriptedTurn, script: str) -> ActionResult | None:
        """Run or hand off the script of an AGENT reply; None when nothing ran here."""
        if turn.label is not Label.AGENT or not script.strip() or turn.agent.actions == "off":
            return None
        if turn.agent.actions == "client":
            turn.handle.emit(ActionEvent(SCRIPT_LANGUAGE, script))
            return None
        if self.runner is None:  # refused at start-up; kept as a clear answer regardless
            result = ActionResult(None, "", "no sandbox is available on this gateway", 0, False)
        else:
            try:
                result = await self.runner.run(script)
            except SessionGateError as exc:  # busy, or the sandbox could not start
                result = ActionResult(None, "", exc.message, 0, False, exc.code)
        turn.handle.emit(
            ActionResultEvent(
                exit_code=result.exit_code,
                stdout=result.stdout,
                stderr=result.stderr,
                duration_ms=result.duration_ms,
                killed=result.killed,
                reason=result.reason,
                script=script,
            )
        )
        return result


def with_contract_prompt(wire: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The wire with the contract's instructions after the agent's own system messages,
    so the model knows the shape whatever the agent's prompt says."""
    at = 0
    while at < len(wire) and wire[at]["role"] == "system":
        at += 1
    return [*wire[:at], {"role": "system", "content": SCRIPT_CONTRACT_PROMPT}, *wire[at:]]


def _failure_answer(result: ActionResult) -> str:
    if result.killed:
        why = f"it was stopped ({result.reason or 'a limit was reached'})"
    elif result.exit_code is None:
        why = result.reason or "it could not be started"
    else:
        why = f"it ended with exit code {result.exit_code}"
    return f"I tried to do that, but the action failed: {why}."
