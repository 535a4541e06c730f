"""The Conversations API's items, pure (DESIGN.md §14): a segment's stored messages as
OpenAI's items (messages, `function_call`, `function_call_output`), each item's id made
from the message it came from — the original when the message is a copy, so an item
keeps its id across the rotation an item's deletion makes — and a page of them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sessiongate.core.context import without_superseded
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.core.tool_calls import calls_of

#: Message metadata: the message a fork's or an edit's copy was made from.
COPIED_FROM = "copied_from"


def origin_of(message: Message) -> str:
    """The id of the message this one is (itself, or the one it was copied from)."""
    copied = message.metadata.get(COPIED_FROM)
    return copied if isinstance(copied, str) and copied else message.message_id


def item_stem(origin: str) -> str:
    return hashlib.blake2b(origin.encode(), digest_size=12).hexdigest()


@dataclass(frozen=True, slots=True)
class Item:
    """One item and the stored message it comes from."""

    item_id: str
    message: Message
    body: dict[str, Any]


def items_of(message: Message) -> list[Item]:
    """A stored message as items: a user or assistant message (its text), an assistant's
    tool calls (one `function_call` each), a tool result (`function_call_output`)."""
    stem = item_stem(origin_of(message))
    status = "incomplete" if message.status is MessageStatus.INTERRUPTED else "completed"
    if message.role is Role.TOOL:
        call_id = str(message.metadata.get("tool_call_id", ""))
        body: dict[str, Any] = {
            "type": "function_call_output",
            "id": f"fco_{stem}",
            "call_id": call_id,
            "output": message.content,
            "status": status,
        }
        return [Item(body["id"], message, body)]
    if message.role not in (Role.USER, Role.ASSISTANT, Role.SYSTEM):
        return []
    calls = calls_of(message.metadata) if message.role is Role.ASSISTANT else ()
    items: list[Item] = []
    if message.content or not calls:
        part = "output_text" if message.role is Role.ASSISTANT else "input_text"
        content: dict[str, Any] = {"type": part, "text": message.content}
        if part == "output_text":
            content["annotations"] = []
        body = {
            "type": "message",
            "id": f"msg_{stem}",
            "role": message.role.value,
            "status": status,
            "content": [content],
        }
        items.append(Item(body["id"], message, body))
    for index, call in enumerate(calls):
        body = {
            "type": "function_call",
            "id": f"fc_{stem}_{index}",
            "call_id": call.call_id,
            "name": call.name,
            "arguments": call.arguments,
            "status": "completed",
        }
        items.append(Item(body["id"], message, body))
    return items


def thread_items(thread: Sequence[Message]) -> list[Item]:
    """The segment's items in order, superseded answers left out."""
    return [item for message in without_superseded(thread) for item in items_of(message)]


@dataclass(frozen=True, slots=True)
class ItemPage:
    data: list[dict[str, Any]]
    has_more: bool

    def listing(self) -> dict[str, Any]:
        return {
            "object": "list",
            "data": self.data,
            "first_id": self.data[0]["id"] if self.data else None,
            "last_id": self.data[-1]["id"] if self.data else None,
            "has_more": self.has_more,
        }


def page_of(
    items: Sequence[Mapping[str, Any]], *, after: str | None, limit: int, order: str
) -> ItemPage:
    """OpenAI's paging: `order` (`asc`, `desc`), then the items after `after` (none when
    it names no item), `limit` of them."""
    ordered = list(items) if order == "asc" else list(reversed(items))
    if after is not None:
        ids = [item.get("id") for item in ordered]
        ordered = ordered[ids.index(after) + 1 :] if after in ids else []
    return ItemPage([dict(item) for item in ordered[:limit]], len(ordered) > limit)
