"""A turn's plan for an OpenAI client's conversation (DESIGN.md §11): what reconciling the
client's list decided (service/conversation/reconcile.py), and the recorder that adds
each message, as the client sees it, to the conversation's tree of hashed nodes.

The turn service (service/turn/pipeline.py) asks the plan what to write and tells it what was
written; the plan keeps the tree's tip, so the next node chains from the last one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from sessiongate.core.context import CLIENT_SYSTEM, SUPERSEDES
from sessiongate.core.conversation import (
    ROOT,
    ClientCall,
    ClientMessage,
    chain,
    render_notice,
)
from sessiongate.core.conversation import (
    Role as ClientRole,
)
from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import (
    Message,
    MessageStatus,
    Role,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.core.tool_calls import calls_of
from sessiongate.service.conversation.client_turn import ClientTurn
from sessiongate.service.turn.client_reply import CLIENT_TOOLS
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.store.conversations import (
    ConversationHead,
    ConversationIndex,
    ConversationNode,
)


class Move(StrEnum):
    #: New messages follow the head.
    APPEND = "append"
    #: The list ends where the stored branch does, with no answer yet: answer again.
    RETRY = "retry"
    #: The same list again: a new answer supersedes the last one.
    REGENERATE = "regenerate"
    #: An earlier message was edited: a new segment continues the shared part.
    FORK = "fork"


@dataclass(slots=True)
class ClientPlan:
    """What `prepare` decided for a turn, and the recorder of what the turn adds."""

    index: ConversationIndex
    #: `[openai] rotation_notice`: what the client was shown before a rotated answer.
    rotation_notice: str
    ref: KeyRef
    turn: ClientTurn
    record: SessionKeyRecord
    segment: Segment
    move: Move
    #: The fork's rotation, if any.
    rotations: list[RotationRecord] = field(default_factory=list)
    #: Whether the turn appends the list's last (user) message itself.
    append_user: bool = False
    #: Whether the lifecycle stage (`/new`, idle, day, semantic) runs: only for a plain
    #: new user message.
    run_rotation_stage: bool = False
    #: Messages the new answer supersedes (left out of its context).
    superseded: tuple[str, ...] = ()
    #: Where the next recorded message chains from.
    tip: tuple[str, int] = (ROOT, 0)
    _texts: list[str] = field(default_factory=list)
    _ids: list[str] = field(default_factory=list)

    @property
    def user_metadata(self) -> dict[str, Any]:
        return {CLIENT_SYSTEM: list(self.turn.system)}

    async def user_appended(self, message: Message) -> None:
        """The turn wrote the list's last message."""
        await self.remember(self.turn.messages[-1], message.session_id, (message.message_id,))

    def reply_metadata(self, role: Role, metadata: dict[str, Any]) -> dict[str, Any]:
        if role is Role.ASSISTANT and self.superseded:
            return {**metadata, SUPERSEDES: list(self.superseded)}
        return metadata

    async def appended(self, message: Message, handle: TurnHandle) -> None:
        """A message of the answer was written; the answer as the client sees it is
        recorded with its last message (every model step's text, after the rotation
        notice the client was shown)."""
        if message.role not in (Role.ASSISTANT, Role.TOOL):
            return
        self._ids.append(message.message_id)
        if message.role is not Role.ASSISTANT:
            return
        self._texts.append(message.content)
        meta = message.metadata
        final = (
            message.status is MessageStatus.INTERRUPTED
            or "tool_calls" not in meta
            or bool(meta.get(CLIENT_TOOLS))
        )
        if not final:
            return
        reason = str(handle.rotations[-1].get("reason", "")) if handle.rotations else ""
        notice = render_notice(self.rotation_notice, reason) if reason else ""
        calls: tuple[ClientCall, ...] = ()
        if meta.get(CLIENT_TOOLS):
            calls = tuple(ClientCall(c.call_id, c.name, c.arguments) for c in calls_of(meta))
        answer = ClientMessage(ClientRole.ASSISTANT, notice + "".join(self._texts), calls=calls)
        ids = tuple(self._ids)
        self._texts.clear()
        self._ids.clear()
        await self.remember(answer, message.session_id, ids)

    async def remember(
        self, message: ClientMessage, session_id: str | None, message_ids: tuple[str, ...]
    ) -> None:
        """Add the message to the conversation's tree after the tip and make it the
        head."""
        parent, position = self.tip
        node = ConversationNode(
            key=self.ref,
            hash=chain(parent, message),
            parent=parent,
            position=position + 1,
            role=message.role.value,
            session_id=session_id,
            message_ids=message_ids,
        )
        await self.index.record([node], ConversationHead(self.ref, node.hash, node.position))
        self.tip = (node.hash, node.position)
