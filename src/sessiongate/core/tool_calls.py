"""Tool steps in a thread: pairing calls with results, and what the model sees of them. Pure.

Every provider rejects a thread in which an assistant message that asked for tools is
not followed by one result per call, or a result answers no call. History can hold both
shapes: a turn cut short after the model asked for tools (cancelled, timed out, the
process killed), an import, a memory window whose first message is a result. The rule,
applied every time context is assembled, so no stored history can break a model call:

- Steps are *groups*: an assistant message with `tool_calls` and the results right after
  it. A window or a token budget takes a group whole or not at all.
- A call without a result gets a synthetic result with status `interrupted` right after
  its assistant message (in the context only: the store is append-only).
- A result whose call is not in the assistant message right before it is left out.
- Each result is capped at `max_result_chars` for the model (head and tail kept, the cut
  marked in the text); the store keeps it whole.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiongate.core.segments import Message, Role

#: The text of a result the model never got because its call was cut short.
INTERRUPTED_RESULT = "interrupted: this tool call did not finish (the turn was cut short)"

TOOL_STATUSES = frozenset({"ok", "error", "interrupted"})


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One call an assistant message asked for, as kept in its metadata."""

    call_id: str
    name: str
    arguments: str

    def to_metadata(self) -> dict[str, str]:
        return {"id": self.call_id, "name": self.name, "arguments": self.arguments}


def calls_of(metadata: Mapping[str, Any]) -> tuple[ToolCallRecord, ...]:
    """The tool calls kept in an assistant message's metadata (malformed entries, which
    only a hand-written import could hold, are ignored)."""
    raw = metadata.get("tool_calls")
    if not isinstance(raw, list):
        return ()
    calls = []
    for item in raw:
        if not isinstance(item, dict):
            continue
        call_id, name, arguments = item.get("id"), item.get("name"), item.get("arguments")
        if isinstance(call_id, str) and isinstance(name, str):
            text = arguments if isinstance(arguments, str) else "{}"
            calls.append(ToolCallRecord(call_id, name, text))
    return tuple(calls)


def cap_result(text: str, limit: int) -> str:
    """`text` if it fits in `limit` characters, else its head and tail with the cut
    marked between them (the marker says how much was left out)."""
    if len(text) <= limit:
        return text
    marker = f"\n[… {len(text) - limit} characters cut …]\n"
    room = max(limit - len(marker), 0)
    head = room - room // 3
    tail = room - head
    return text[:head] + marker + (text[len(text) - tail :] if tail else "")


@dataclass(frozen=True, slots=True)
class ThreadItem:
    """One message of the thread as the context holds it: a plain message, an assistant
    message with its calls, or one result (`status` ok | error | interrupted)."""

    role: str
    content: str
    source: str
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    status: str | None = None
    #: The signed reasoning blocks the model returned with its calls (metadata
    #: `reasoning`), which an upstream that signs them wants back (models/base.py).
    reasoning: tuple[dict[str, Any], ...] = ()


def signed_reasoning(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """The reasoning blocks of a kept reply that carry a signature."""
    found = metadata.get("reasoning")
    if not isinstance(found, list):
        return ()
    return tuple(
        {"text": str(b.get("text", "")), "signature": b["signature"]}
        for b in found
        if isinstance(b, dict) and isinstance(b.get("signature"), str)
    )


def _result_status(message: Message) -> str:
    status = message.metadata.get("status")
    return status if isinstance(status, str) and status in TOOL_STATUSES else "ok"


def paired_groups(messages: Sequence[Message], max_result_chars: int) -> list[list[ThreadItem]]:
    """The thread as groups, every call answered exactly once and in order, orphan
    results dropped. A plain message is a group of one."""
    groups: list[list[ThreadItem]] = []
    i, n = 0, len(messages)
    while i < n:
        message = messages[i]
        calls = calls_of(message.metadata) if message.role is Role.ASSISTANT else ()
        if message.role is Role.TOOL:
            i += 1  # a result with no call right before it: an orphan
            continue
        if not calls:
            groups.append([ThreadItem(message.role.value, message.content, message.message_id)])
            i += 1
            continue
        reasoning = signed_reasoning(message.metadata)
        group = [
            ThreadItem(
                "assistant",
                message.content,
                message.message_id,
                tool_calls=calls,
                reasoning=reasoning,
            )
        ]
        results: dict[str, Message] = {}
        j = i + 1
        while j < n and messages[j].role is Role.TOOL:
            call_id = messages[j].metadata.get("tool_call_id")
            if isinstance(call_id, str) and call_id not in results:
                results[call_id] = messages[j]
            j += 1
        for call in calls:
            result = results.get(call.call_id)
            if result is None:
                group.append(_interrupted(call, f"{message.message_id}#{call.call_id}"))
            else:
                group.append(
                    ThreadItem(
                        "tool",
                        cap_result(result.content, max_result_chars),
                        result.message_id,
                        tool_call_id=call.call_id,
                        name=call.name,
                        status=_result_status(result),
                    )
                )
        groups.append(group)
        i = j
    return groups


def _interrupted(call: ToolCallRecord, source: str) -> ThreadItem:
    return ThreadItem(
        "tool",
        INTERRUPTED_RESULT,
        f"repair:{source}",
        tool_call_id=call.call_id,
        name=call.name,
        status="interrupted",
    )


def window_groups(groups: Sequence[list[ThreadItem]], memory_window: int) -> list[list[ThreadItem]]:
    """The newest groups holding at most `memory_window` messages, but always the newest
    group whole (the model must see what it answers, even a step larger than the window)."""
    kept: list[list[ThreadItem]] = []
    count = 0
    for group in reversed(groups):
        if kept and count + len(group) > memory_window:
            break
        kept.append(group)
        count += len(group)
    kept.reverse()
    return kept


def flatten(groups: Sequence[Sequence[ThreadItem]]) -> Iterator[ThreadItem]:
    for group in groups:
        yield from group


def to_wire(item: ThreadItem) -> dict[str, Any]:
    """The provider-neutral wire message (models/base.py) for one item."""
    if item.tool_calls:
        wire: dict[str, Any] = {
            "role": "assistant",
            "content": item.content,
            "tool_calls": [
                {"id": c.call_id, "name": c.name, "arguments": c.arguments} for c in item.tool_calls
            ],
        }
        if item.reasoning:
            wire["reasoning"] = [dict(block) for block in item.reasoning]
        return wire
    if item.tool_call_id is not None:
        return {
            "role": "tool",
            "tool_call_id": item.tool_call_id,
            "name": item.name or "",
            "content": item.content,
            "status": item.status or "ok",
        }
    return {"role": item.role, "content": item.content}


def has_tool_steps(messages: Sequence[Message]) -> bool:
    """Whether any message takes part in a tool step (the common text-only thread takes
    the faster path of context assembly)."""
    return any(
        m.role is Role.TOOL or (m.role is Role.ASSISTANT and "tool_calls" in m.metadata)
        for m in messages
    )


def inline_steps(items: Sequence[ThreadItem]) -> list[dict[str, Any]]:
    """Wire messages with every tool step folded into its assistant message as text:
    `[tool name(arguments) → status: result]` lines. For models that cannot take tool
    messages; roles still alternate as they did."""
    wire: list[dict[str, Any]] = []
    for item in items:
        if item.tool_call_id is not None:
            if wire and wire[-1]["role"] == "assistant":
                line = f"[tool {item.name} → {item.status}: {item.content}]"
                wire[-1]["content"] = (wire[-1]["content"] + "\n" + line).lstrip("\n")
            continue
        if item.tool_calls:
            calls = "\n".join(f"[calls {c.name}({c.arguments})]" for c in item.tool_calls)
            wire.append({"role": "assistant", "content": (item.content + "\n" + calls).lstrip()})
            continue
        wire.append({"role": item.role, "content": item.content})
    return wire


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as a model sees it. `parameters` is a JSON Schema object."""

    name: str
    description: str
    parameters: Mapping[str, Any] = field(
        default_factory=lambda: {"type": "object", "properties": {}}
    )
