"""The ports a turn calls out through for seed 000's voice and hand-off; the engine
plugs the adapters in when `[voices]` or hand-offs are configured."""

from __future__ import annotations

from typing import Protocol

from sessiongate.core.keys import KeyRef
from sessiongate.core.users import Caller
from sessiongate.service.agents import AgentProfile
from sessiongate.service.turn.handle import InboundTurn, TurnHandle
from sessiongate.service.turn.plain_reply import ReplyAddendum


class Speaker(Protocol):
    """Speaks a finished reply (`speak: true`): emits, after `end`, an `audio_part` event
    for each group of sentences as it is ready (none for a one-sentence reply), then one
    `audio` event with the whole reply; never fails the turn (a failure is an `audio`
    event with `error`, the parts sent before it standing)."""

    async def speak(
        self, agent: AgentProfile, inbound: InboundTurn, ref: KeyRef, handle: TurnHandle
    ) -> None: ...


class HandoffStage(Protocol):
    """Seed 000's hybrid hand-off for agents whose model cannot call tools: given the
    finished reply, returns the text to append to it (emitting its own `handoff`
    events), or None when the agent has no hand-off."""

    def for_turn(
        self, agent: AgentProfile, caller: Caller, ref: KeyRef
    ) -> ReplyAddendum | None: ...
