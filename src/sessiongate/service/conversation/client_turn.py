"""What an OpenAI-compatible request adds to a turn (`InboundTurn.client`): the client's
whole message list, how its conversation was found, its system messages and the model
options it asked for (DESIGN.md §11)."""

from __future__ import annotations

from dataclasses import dataclass

from sessiongate.core.conversation import ClientMessage, Identity, prefix_hashes
from sessiongate.models.base import ModelOptions


@dataclass(frozen=True, slots=True)
class ClientTurn:
    #: The client's list, system messages aside; it ends with the new user message or
    #: with tool results.
    messages: tuple[ClientMessage, ...]
    identity: Identity
    #: The client's system messages: sent to the model after the agent's own, kept with
    #: the user message of the turn (core/context.py).
    system: tuple[str, ...] = ()
    #: The client's tools, tool_choice and response_format (None: none asked for).
    options: ModelOptions | None = None
    #: `hashes[i]` names the first `i` messages (core/conversation.py); computed when
    #: not given.
    hashes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if len(self.hashes) != len(self.messages) + 1:
            object.__setattr__(self, "hashes", prefix_hashes(self.messages))
