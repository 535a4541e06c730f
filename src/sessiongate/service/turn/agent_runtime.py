"""What the turn service hands the agent runtime for one turn of an agent with tools or a
plan, and the port the runtime implements (agents/runtime.py).

The turn service has already resolved the key, rotated, committed the user message and
assembled the context; the runtime runs the model and tool steps, appends what they
produce through `append` (the only way it writes), and ends the turn with an `end`
event or by raising a SessionGateError.
"""

from __future__ import annotations

from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from sessiongate.core.context import AssembledContext
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.core.users import Caller
from sessiongate.models.base import ModelOptions, ToolSpec
from sessiongate.service.agents import AgentProfile
from sessiongate.service.turn.handle import TurnHandle


class Appender(Protocol):
    def __call__(
        self,
        role: Role,
        content: str,
        metadata: dict[str, Any],
        status: MessageStatus = MessageStatus.COMPLETE,
    ) -> Awaitable[Message]: ...


@dataclass(frozen=True, slots=True)
class AgentTurn:
    ref: KeyRef
    session_id: str
    agent: AgentProfile
    handle: TurnHandle
    context: AssembledContext
    #: The reply model first (a session override wins), then the agent's fallbacks.
    model_names: list[str]
    caller: Caller
    #: The user's message of this turn (already committed).
    content: str
    max_reply_chars: int
    append: Appender
    #: How deep in agent-as-tool delegation this turn is (0: a user's own turn).
    depth: int = 0


class AgentRuntime(Protocol):
    async def run(self, turn: AgentTurn) -> None: ...

    async def hosted_equivalents(
        self, agent: AgentProfile, kinds: Sequence[str], *, primary: bool
    ) -> Mapping[str, object]:
        """Hosted tool type → the agent's tool run in its place, for those of `kinds`
        the agent has and this user is offered."""
        ...

    async def run_hosted(
        self, turn: AgentTurn, options: ModelOptions, kinds: Sequence[str]
    ) -> None:
        """A Responses API turn with the client's tools (`options`) and the hosted tools
        of `kinds` run as the agent's equivalents (agents/runners/hosted.py)."""
        ...

    async def describe_tools(
        self, agent: AgentProfile, *, primary: bool
    ) -> list[tuple[ToolSpec, str]]:
        """What `agent` offers a user: each tool's spec and its source."""
        ...
