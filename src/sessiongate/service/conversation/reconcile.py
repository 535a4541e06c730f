"""Reconciling an OpenAI client's message list with the conversation stored under its
key (DESIGN.md §11), under the key's lock, before the turn's user message is written.
Which key a list belongs to is decided before, in service/conversation/locate.py.

With the key's head (the newest message of its current branch):

- the head is in the list: the messages after it are new: they are appended (the last
  user message by the turn itself, earlier ones and tool results here); the head is the
  list's last message (a turn that got no answer): answered again, nothing appended;
- with `X-Session-Key`, a one-message list is always new (clients that send only their
  new message), and so is the new input of a list that shares nothing with the key;
- the list is the stored branch without its last answer (regenerate): nothing is
  appended; the new answer carries `supersedes` (the ids of the old answer's messages),
  and context assembly leaves the old one out — it stays in the store;
- otherwise the list left the branch at an earlier message (an edit): a new segment
  (rotation reason `fork`) starts with copies of the shared part (the newest
  `memory_window` messages of it, each with `copied_from`), then the list's messages
  after the shared part. Nothing stored is rewritten.
- a key with stored messages but no conversation yet (used by other transports, or
  imported) takes the list's history as what it holds: only the new input is appended.

A new conversation, and one keyed by a client's id, follows the client's boundaries: the
gateway switches its idle and day-boundary rotation off (a per-key override, visible and
changeable with `PATCH /v1/sessions/{key}`) unless `[openai] client_keys_rotate`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime
from typing import Any

from sessiongate.config.openai import OpenAIConfig
from sessiongate.core.context import CLIENT_SYSTEM, OFFLINE, is_stand_in_text
from sessiongate.core.conversation import (
    MAX_ANSWER_NODES,
    ROOT,
    ClientMessage,
    Identity,
    render_notice,
    trailing_input,
)
from sessiongate.core.conversation import (
    Role as ClientRole,
)
from sessiongate.core.keys import KeyRef
from sessiongate.core.rotation import ActionKind, LifecycleAction, parse_new_command
from sessiongate.core.segments import (
    Message,
    MessageStatus,
    Role,
    RotationReason,
    Segment,
    SessionKeyRecord,
)
from sessiongate.service.agents import AgentProfile
from sessiongate.service.conversation.client_turn import ClientTurn
from sessiongate.service.conversation.plan import ClientPlan, Move
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.client_reply import CLIENT_TOOLS
from sessiongate.service.turn.handle import TurnHandle
from sessiongate.store.conversations import (
    ConversationHead,
    ConversationIndex,
    ConversationNode,
)

#: The lifecycle override of the keys the gateway makes for OpenAI clients.
CLIENT_BOUNDARIES = {"lifecycle": {"idle_window": "off", "day_boundary": "off"}}
#: Message metadata: a copy made by a fork, and a message the client supplied itself.
COPIED_FROM = "copied_from"
FROM_CLIENT = "from_client"


class Reconciler:
    def __init__(
        self, sessions: SessionService, index: ConversationIndex, config: OpenAIConfig
    ) -> None:
        self.sessions = sessions
        self.index = index
        self.config = config

    async def prepare(
        self,
        ref: KeyRef,
        record: SessionKeyRecord,
        agent: AgentProfile,
        segment: Segment,
        turn: ClientTurn,
        handle: TurnHandle,
        now: datetime,
    ) -> ClientPlan:
        """Decide how the list continues the key's conversation and write what comes
        before the turn's own user message (the caller holds the key's lock)."""
        messages, hashes = turn.messages, turn.hashes
        n = len(messages)
        head = await self.index.head(ref)
        if head is not None and segment.message_count == 0 and not segment.parent_ids:
            head = None  # the key is new: a head left by a key of the same name is stale
        if (
            head is None
            and turn.identity is not Identity.KEY
            and not record.overrides
            and not self.config.client_keys_rotate
        ):
            record = await self.sessions.store.set_overrides(ref, dict(CLIENT_BOUNDARIES))
        notice_template = self.config.rotation_notice
        plan = ClientPlan(self.index, notice_template, ref, turn, record, segment, Move.APPEND)
        start = 0
        if head is None:
            if segment.message_count > 0 or segment.parent_ids:
                # Stored by other transports (or imported): the list's history is taken
                # as what the key holds.
                start = trailing_input(messages)
                plan.tip = (hashes[start], start)
        else:
            plan.tip = (head.hash, head.position)
            at = {h: i for i, h in enumerate(hashes)}
            position = at.get(head.hash)
            if position == n:
                plan.move = Move.RETRY
            elif position is not None:
                start = position
            elif turn.identity is Identity.KEY and n == 1:
                start = 0
            else:
                start = await self._earlier_state(plan, head, agent, handle, now)
        if plan.move is Move.RETRY or plan.move is Move.REGENERATE:
            return plan
        new = messages[start:]
        final_user = messages[-1].role is ClientRole.USER
        pending = new[:-1] if final_user else new
        for message in pending:
            await self._append_client(plan, message, handle, now)
        plan.append_user = final_user
        plan.run_rotation_stage = final_user and not pending and plan.move is Move.APPEND
        if final_user and plan.run_rotation_stage:
            command = parse_new_command(messages[-1].content)
            if command is not None and not command.rest:
                # A bare `/new`: the rotation is the whole turn. What the client is shown
                # (the command, the notice) is its conversation too.
                await plan.remember(messages[-1], None, ())
                notice = render_notice(notice_template, RotationReason.MANUAL.value)
                await plan.remember(ClientMessage(ClientRole.ASSISTANT, notice), None, ())
        return plan

    async def _earlier_state(
        self,
        plan: ClientPlan,
        head: ConversationHead,
        agent: AgentProfile,
        handle: TurnHandle,
        now: datetime,
    ) -> int:
        """The list is not a continuation of the head: a regenerate (sets the plan's move
        and returns 0) or a fork; returns where the list's new messages start."""
        turn, ref = plan.turn, plan.ref
        hashes, n = turn.hashes, len(turn.messages)
        known = {node.hash: node for node in await self.index.nodes(ref, hashes[1:])}
        shared = max((i for i in range(1, n + 1) if hashes[i] in known), default=0)
        if shared == 0 and turn.identity is Identity.KEY:
            # Nothing in common from the start (a client sending a window of its
            # history): only the new input is new, as the key's own client says.
            return trailing_input(turn.messages)
        if shared == n:
            answer = await self._answer_after(ref, head, hashes[n])
            if answer is not None:
                plan.move = Move.REGENERATE
                plan.superseded = tuple(i for node in answer for i in node.message_ids)
                plan.tip = (hashes[n], answer[-1].position - 1)
                return n
        fork_at = known.get(hashes[shared]) if shared else None
        await self._fork(plan, fork_at, agent, handle, now)
        return shared

    async def _answer_after(
        self, ref: KeyRef, head: ConversationHead, target: str
    ) -> list[ConversationNode] | None:
        """The head's answer back to `target` (newest first) when nothing but that answer
        (its steps, the client's tool calls and results) lies between them."""
        found: list[ConversationNode] = []
        wanted = head.hash
        for _ in range(MAX_ANSWER_NODES):
            nodes = await self.index.nodes(ref, [wanted])
            if not nodes or nodes[0].role == ClientRole.USER.value:
                return None
            found.append(nodes[0])
            if nodes[0].parent == target:
                return found
            wanted = nodes[0].parent
        return None

    async def _fork(
        self,
        plan: ClientPlan,
        fork_at: ConversationNode | None,
        agent: AgentProfile,
        handle: TurnHandle,
        now: datetime,
    ) -> None:
        """A new segment (reason `fork`) holding copies of the shared part's newest
        `memory_window` messages."""
        plan.move = Move.FORK
        action = LifecycleAction(ActionKind.ROTATE, RotationReason.FORK)
        segment, rotation = await self.sessions.apply(plan.ref, plan.segment, action, now)
        plan.segment = segment
        plan.rotations.append(rotation)
        plan.tip = (ROOT, 0)
        if fork_at is None:
            return
        plan.tip = (fork_at.hash, fork_at.position)
        path: list[ConversationNode] = []
        count = 0
        node: ConversationNode | None = fork_at
        while node is not None and count < agent.memory_window:
            path.append(node)
            count += len(node.message_ids)
            if node.parent == ROOT:
                break
            parents = await self.index.nodes(plan.ref, [node.parent])
            node = parents[0] if parents else None
        for node in reversed(path):
            for original in await self._messages(node.message_ids):
                meta = {**original.metadata, COPIED_FROM: original.message_id}
                meta["turn_id"] = handle.turn_id
                await self._append(
                    plan, original.role, original.content, meta, now, original.status
                )

    async def _messages(self, message_ids: Sequence[str]) -> list[Message]:
        """The stored messages with these ids (`session_id:seq`), in order."""
        found: list[Message] = []
        for message_id in message_ids:
            session_id, _, seq = message_id.rpartition(":")
            if not seq.isdigit():
                continue
            page = await self.sessions.store.list_messages(
                session_id, after_seq=int(seq) - 1, limit=1
            )
            found.extend(m for m in page if m.message_id == message_id)
        return found

    async def _append(
        self,
        plan: ClientPlan,
        role: Role,
        content: str,
        metadata: dict[str, Any],
        now: datetime,
        status: MessageStatus = MessageStatus.COMPLETE,
    ) -> Message:
        message = await self.sessions.append_message(
            plan.ref,
            plan.segment.session_id,
            role=role,
            content=content,
            now=now,
            status=status,
            metadata=metadata,
        )
        plan.segment = replace(
            plan.segment,
            message_count=message.seq,
            last_activity_at=max(plan.segment.last_activity_at, message.created_at),
        )
        return message

    async def _append_client(
        self, plan: ClientPlan, message: ClientMessage, handle: TurnHandle, now: datetime
    ) -> None:
        """A message of the list the store does not have yet, other than the turn's own
        user message: tool results, or messages the client supplies itself."""
        metadata: dict[str, Any] = {"turn_id": handle.turn_id}
        role = Role(message.role.value)
        if message.role is ClientRole.TOOL:
            metadata.update(
                tool_call_id=message.call_id or "",
                name=message.name or "",
                status="ok",
                client=True,
            )
        else:
            metadata[FROM_CLIENT] = True
            if message.role is ClientRole.USER:
                metadata[CLIENT_SYSTEM] = list(plan.turn.system)
            elif is_stand_in_text(message.content):
                # The offline stand-in's answer, as the client shows it: kept, never
                # a model's input (core/context.py), like the one the gateway stored.
                metadata[OFFLINE] = True
            if message.calls:
                metadata["tool_calls"] = [
                    {"id": c.call_id, "name": c.name, "arguments": c.arguments}
                    for c in message.calls
                ]
                metadata[CLIENT_TOOLS] = True
        stored = await self._append(plan, role, message.content, metadata, now)
        await plan.remember(message, stored.session_id, (stored.message_id,))
