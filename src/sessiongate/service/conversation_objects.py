"""The Conversations API (DESIGN.md §14): a conversation (`conv_…`) is a key in its
owner's namespace, `oai:conversation:<id>`; its items are the messages of the key's
latest segment (core/conversation_items.py). Items added are appended and recorded in the
key's conversation tree (so a response in the conversation continues after them);
deleting an item never rewrites history: the key rotates (reason `edit`) to a new
segment holding copies of the remaining messages, whose items keep their ids.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sessiongate.core.context import CLIENT_SYSTEM
from sessiongate.core.conversation import ROOT, ClientCall, ClientMessage, chain
from sessiongate.core.conversation import Role as ClientRole
from sessiongate.core.conversation_items import COPIED_FROM, Item, thread_items
from sessiongate.core.keys import KeyRef
from sessiongate.core.rotation import ActionKind, LifecycleAction
from sessiongate.core.segments import Message, Role, RotationReason
from sessiongate.core.users import Caller
from sessiongate.service.conversation.locate import ConversationService
from sessiongate.service.conversation.reconcile import CLIENT_BOUNDARIES, FROM_CLIENT
from sessiongate.service.sessions import SessionService
from sessiongate.service.turn.client_reply import CLIENT_TOOLS
from sessiongate.store.conversations import ConversationHead, ConversationNode
from sessiongate.store.responses import ConversationObject, ResponseStore

__all__ = ["MAX_NEW_ITEMS", "ConversationObject", "ConversationObjects"]

#: A conversation's items are read from its latest segment a page at a time.
PAGE = 500
#: The most items one request may add.
MAX_NEW_ITEMS = 20


class ConversationObjects:
    def __init__(
        self, rows: ResponseStore, sessions: SessionService, conversations: ConversationService
    ) -> None:
        self.rows = rows
        self.sessions = sessions
        self.index = conversations.index

    async def create(
        self, caller: Caller, messages: Sequence[Mapping[str, Any]], metadata: dict[str, str]
    ) -> ConversationObject:
        hex_id = self.sessions.ids.new().replace("-", "")
        ref = caller.key(f"oai:conversation:{hex_id}")
        async with self.sessions.locks.hold(ref):
            record, _ = await self.sessions.open_key(ref)
            if not record.overrides:
                await self.sessions.store.set_overrides(ref, dict(CLIENT_BOUNDARIES))
            await self._append(ref, messages)
        conversation = ConversationObject(
            f"conv_{hex_id}", caller.name, ref.name, metadata, self.sessions.clock.now()
        )
        await self.rows.add_conversation(conversation)
        return conversation

    async def get(self, caller: Caller, conversation_id: str) -> ConversationObject | None:
        return await self.rows.get_conversation(caller.name, conversation_id)

    async def update(
        self, caller: Caller, conversation_id: str, metadata: dict[str, str]
    ) -> ConversationObject | None:
        if not await self.rows.set_conversation_metadata(caller.name, conversation_id, metadata):
            return None
        return await self.get(caller, conversation_id)

    async def delete(self, caller: Caller, conversation_id: str) -> bool:
        """The conversation and its key (every segment) are erased."""
        found = await self.get(caller, conversation_id)
        if found is None:
            return False
        if await self.sessions.store.get_key(KeyRef(caller.name, found.key)) is not None:
            await self.sessions.delete(found.key, caller)
        await self.rows.delete_conversation(caller.name, conversation_id)
        return True

    async def items(self, conversation: ConversationObject) -> list[Item]:
        return thread_items(await self._thread(KeyRef(conversation.owner, conversation.key)))

    async def add(
        self, conversation: ConversationObject, messages: Sequence[Mapping[str, Any]]
    ) -> list[Item]:
        """Append the items; the new ones, as they are listed."""
        ref = KeyRef(conversation.owner, conversation.key)
        async with self.sessions.locks.hold(ref):
            await self.sessions.open_key(ref)
            stored = await self._append(ref, messages)
        ids = {m.message_id for m in stored}
        return [item for item in thread_items(stored) if item.message.message_id in ids]

    async def delete_item(self, conversation: ConversationObject, item_id: str) -> bool:
        """Rotate (reason `edit`) to a segment holding copies of every message but the
        one the item comes from (its other items go with it)."""
        ref = KeyRef(conversation.owner, conversation.key)
        async with self.sessions.locks.hold(ref):
            _, segment = await self.sessions.open_key(ref)
            thread = await self._thread(ref)
            gone = {i.message.message_id for i in thread_items(thread) if i.item_id == item_id}
            if not gone:
                return False
            now = self.sessions.clock.now()
            action = LifecycleAction(ActionKind.ROTATE, RotationReason.EDIT)
            segment, _ = await self.sessions.apply(ref, segment, action, now)
            for message in thread:
                if message.message_id in gone:
                    continue
                origin = message.metadata.get(COPIED_FROM) or message.message_id
                await self.sessions.append_message(
                    ref,
                    segment.session_id,
                    role=message.role,
                    content=message.content,
                    now=now,
                    status=message.status,
                    metadata={**message.metadata, COPIED_FROM: origin},
                )
        return True

    async def _thread(self, ref: KeyRef) -> list[Message]:
        if await self.sessions.store.get_key(ref) is None:
            return []
        segment = await self.sessions.store.latest_segment(ref)
        thread: list[Message] = []
        while True:
            after = thread[-1].seq if thread else 0
            page = await self.sessions.store.list_messages(
                segment.session_id, after_seq=after, limit=PAGE
            )
            thread.extend(page)
            if len(page) < PAGE:
                return thread

    async def _append(self, ref: KeyRef, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        """Store chat-shaped messages (core/responses.py's `input_messages`) as the client
        supplied them, and record them in the key's conversation tree."""
        _, segment = await self.sessions.open_key(ref)
        head = await self.index.head(ref)
        parent, position = (head.hash, head.position) if head is not None else (ROOT, 0)
        names: dict[str, str] = {}
        stored: list[Message] = []
        nodes: list[ConversationNode] = []
        now = self.sessions.clock.now()
        for entry in messages:
            role = str(entry["role"])
            content = entry.get("content")
            text = content if isinstance(content, str) else _joined(content)
            metadata: dict[str, Any] = {FROM_CLIENT: True}
            client: ClientMessage | None = None
            if role in ("system", "developer"):
                stored_role = Role.SYSTEM
            elif role == "user":
                stored_role = Role.USER
                metadata[CLIENT_SYSTEM] = []
                client = ClientMessage(ClientRole.USER, text)
            elif role == "assistant":
                stored_role = Role.ASSISTANT
                calls = [
                    ClientCall(c["id"], c["function"]["name"], c["function"]["arguments"])
                    for c in entry.get("tool_calls") or []
                ]
                names.update((c.call_id, c.name) for c in calls)
                if calls:
                    metadata["tool_calls"] = [
                        {"id": c.call_id, "name": c.name, "arguments": c.arguments} for c in calls
                    ]
                    metadata[CLIENT_TOOLS] = True
                client = ClientMessage(ClientRole.ASSISTANT, text, calls=tuple(calls))
            else:
                stored_role = Role.TOOL
                call_id = str(entry.get("tool_call_id", ""))
                name = names.get(call_id, "")
                metadata = {"tool_call_id": call_id, "name": name, "status": "ok", "client": True}
                client = ClientMessage(ClientRole.TOOL, text, call_id=call_id, name=name)
            message = await self.sessions.append_message(
                ref, segment.session_id, role=stored_role, content=text, now=now, metadata=metadata
            )
            stored.append(message)
            if client is not None:
                node_hash = chain(parent, client)
                position += 1
                nodes.append(
                    ConversationNode(
                        key=ref,
                        hash=node_hash,
                        parent=parent,
                        position=position,
                        role=client.role.value,
                        session_id=message.session_id,
                        message_ids=(message.message_id,),
                    )
                )
                parent = node_hash
        if nodes:
            await self.index.record(nodes, ConversationHead(ref, parent, position))
        return stored


def _joined(content: object) -> str:
    if not isinstance(content, list):
        return ""
    texts = [p.get("text") for p in content if isinstance(p, Mapping)]
    return "\n".join(t for t in texts if isinstance(t, str))
