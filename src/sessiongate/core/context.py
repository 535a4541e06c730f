"""Context assembly: exactly what one turn sends to the model. Pure.

The thread comes from the `latest` segment only (plus, for a revert continuation, the
segments it explicitly continues). History enters only as explicitly recalled fragments,
and each one's rationale is carried into the turn's metadata.

What the offline stand-in said (models/offline.py: "No model is configured…", "The model
is unavailable right now…") is kept and shown, but no model ever reads it: its answers are
stored with `metadata.offline: true` and left out of every context here (and of recall,
the topic judge and a stateless request's list). The user message it answered stays: it
is what the user said, a retry answers it, and the next model sees it unanswered.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any

from sessiongate.core.segments import Message, RecallFragment, Role
from sessiongate.core.tool_calls import (
    ThreadItem,
    flatten,
    has_tool_steps,
    inline_steps,
    paired_groups,
    window_groups,
)
from sessiongate.core.tool_calls import to_wire as tool_wire

#: What the model sees of one tool result unless the agent says otherwise.
DEFAULT_MAX_TOOL_RESULT_CHARS = 16_000

TokenCounter = Callable[[str], int]

#: Per-message framing the chat formats add on top of the text itself.
MESSAGE_OVERHEAD_TOKENS = 4


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate: about four characters per token for English text.

    Deliberately conservative for code and non-Latin scripts (one token per character
    beyond the Latin-1 range), so a budget is rarely exceeded in practice.
    """
    if text.isascii():  # the common case, without a walk over every character
        return math.ceil(len(text) / 4)
    wide = sum(1 for ch in text if ord(ch) > 0xFF)
    return math.ceil((len(text) - wide) / 4) + wide


#: One message of the context. `source` says where its text came from: a message id,
#: "system_prompt", "context_file:<name>", "client_system" (an OpenAI client's system
#: message), "memory" (the user's memory items), "recall", "carry_over" (the previous
#: segment's summary after a rotation), or "repair:…" for the
#: `interrupted` result that answers a call cut short (core/tool_calls.py).
ContextMessage = ThreadItem


@dataclass(frozen=True, slots=True)
class ContextFile:
    name: str
    content: str


@dataclass(frozen=True, slots=True)
class AssembledContext:
    messages: tuple[ContextMessage, ...]
    token_estimate: int
    #: Thread messages left out because of the token budget (oldest first).
    dropped_messages: int
    recall: tuple[dict[str, Any], ...] = field(default_factory=tuple)
    #: The memory items in the context's memory block and why (`{memory_id, reason,
    #: score}`, core/memory.py), as the turn's metadata records them.
    memory: tuple[dict[str, Any], ...] = ()
    #: What replaces the text of the turn's own (last) user message on the wire: parts
    #: holding its images and what the model must read first (seed 004's marker). The
    #: stored message keeps the plain text.
    current_parts: tuple[dict[str, Any], ...] = ()

    def to_wire(self, *, inline_tool_steps: bool = False) -> list[dict[str, Any]]:
        """The messages in the model port's wire form. `inline_tool_steps` writes each
        tool step as assistant text instead (for a model without tool support, when the
        thread holds steps another agent or a plan took)."""
        wire: list[dict[str, Any]]
        if not self.has_tool_steps:
            wire = [{"role": m.role, "content": m.content} for m in self.messages]
        elif inline_tool_steps:
            wire = inline_steps(self.messages)
        else:
            wire = [tool_wire(m) for m in self.messages]
        if self.current_parts:
            for index in range(len(wire) - 1, -1, -1):
                if wire[index]["role"] == "user":
                    wire[index] = {**wire[index], "content": list(self.current_parts)}
                    break
        return wire

    @property
    def has_tool_steps(self) -> bool:
        return any(m.tool_calls or m.tool_call_id is not None for m in self.messages)


def recall_metadata(fragments: Sequence[RecallFragment]) -> tuple[dict[str, Any], ...]:
    return tuple(
        {
            "key": f.key,
            "session_id": f.session_id,
            "message_id": f.message_id,
            "seq": f.seq,
            "score": f.score,
            "rationale": f.rationale,
        }
        for f in fragments
    )


def render_recall(fragments: Sequence[RecallFragment]) -> str:
    """The block of explicitly recalled fragments (carried-over summaries excluded)."""
    lines = ["Recalled from earlier segments of this conversation, on explicit request:"]
    for f in fragments:
        # A fragment from another key of the user (recall scope "all") names that key.
        where = f.session_id if f.key is None else f"key {f.key}, {f.session_id}"
        lines.append(f"[{where} #{f.seq} {f.role} — why: {f.rationale}] {f.content}")
    return "\n".join(lines)


#: The `source` of the block of explicitly recalled fragments.
RECALL_SOURCE = "recall"
#: The `source` of a summary of the previous segment carried over at a rotation.
CARRY_OVER_SOURCE = "carry_over"
#: The sources of what `recalled_messages` makes: left out first when the budget is short.
RECALLED_SOURCES = frozenset({RECALL_SOURCE, CARRY_OVER_SOURCE})
#: A rotation's reason, as the carried-over summary's header says it.
ROTATION_WORDS = {"idle": "idle time", "day_boundary": "a new day", "semantic": "a new topic"}


def render_carry_over(fragment: RecallFragment) -> str:
    """A carried-over summary as the model reads it: what it is and why it is there
    (never "on explicit request": nobody asked for it, the agent's `carry_over` did)."""
    reason = fragment.carried_over or "rotation"
    return (
        "Summary of the previous conversation (carried over at rotation:"
        f" {ROTATION_WORDS.get(reason, reason)}; it covers its messages #1 to"
        f" #{fragment.seq}):\n{fragment.content}"
    )


def recalled_messages(fragments: Sequence[RecallFragment]) -> list[ContextMessage]:
    """The system messages `fragments` enter the context as: each carried-over summary
    on its own first, then one block of the explicitly recalled ones."""
    carried = [f for f in fragments if f.carried_over is not None]
    asked = [f for f in fragments if f.carried_over is None]
    messages = [ContextMessage("system", render_carry_over(f), CARRY_OVER_SOURCE) for f in carried]
    if asked:
        messages.append(ContextMessage("system", render_recall(asked), RECALL_SOURCE))
    return messages


#: The `source` of the context's memory block (DESIGN.md §13).
MEMORY_SOURCE = "memory"
#: User-message metadata: the system messages an OpenAI-compatible client sent with it.
CLIENT_SYSTEM = "client_system"
#: Assistant-message metadata: the ids of the answer it replaces (a regenerate).
SUPERSEDES = "supersedes"
#: Assistant-message metadata: `true` when the offline stand-in wrote it, not a model.
OFFLINE = "offline"
#: What every answer of the offline stand-in says near its start (models/offline.py), so
#: one a client hands back in its own message list is known without the store's mark.
STAND_IN_SIGNATURE = "this is sessiongate's offline stand-in answering"


def is_stand_in(message: Message) -> bool:
    """Whether the offline stand-in wrote this stored message (never a model's input)."""
    return message.role is Role.ASSISTANT and message.metadata.get(OFFLINE) is True


def is_stand_in_text(text: str) -> bool:
    """Whether an assistant text a client sent is one of the stand-in's answers."""
    return STAND_IN_SIGNATURE in text[:160]


def without_superseded(
    thread: Sequence[Message], leave_out: Collection[str] = ()
) -> Sequence[Message]:
    """The thread without the answers a later message supersedes (and `leave_out`) and
    without the offline stand-in's answers: a regenerated answer stays in the store, out of
    the context, and so does whatever the stand-in said."""
    gone = set(leave_out)
    stand_ins = False
    for message in thread:
        replaced = message.metadata.get(SUPERSEDES)
        if isinstance(replaced, list):
            gone.update(str(m) for m in replaced)
        stand_ins = stand_ins or is_stand_in(message)
    if not gone and not stand_ins:
        return thread
    return [m for m in thread if m.message_id not in gone and not is_stand_in(m)]


def client_system_of(thread: Sequence[Message]) -> tuple[str, ...]:
    """The client system messages sent with the newest user message that carried any
    (the client's instructions hold until it sends others)."""
    for message in reversed(thread):
        found = message.metadata.get(CLIENT_SYSTEM) if message.role is Role.USER else None
        if isinstance(found, list):
            return tuple(str(text) for text in found)
    return ()


def assemble_context(
    *,
    thread: Sequence[Message],
    memory_window: int,
    system_prompt: str | None = None,
    context_files: Sequence[ContextFile] = (),
    recalled: Sequence[RecallFragment] = (),
    token_budget: int | None = None,
    count_tokens: TokenCounter = estimate_tokens,
    max_tool_result_chars: int = DEFAULT_MAX_TOOL_RESULT_CHARS,
    client_system: Sequence[str] | None = None,
    leave_out: Collection[str] = (),
    memory_block: str | None = None,
) -> AssembledContext:
    """Build the turn's context from the thread tail, system text and recalled fragments.

    Order: system prompt, context files, the client's system messages (`client_system`,
    else those kept with the thread's newest user message), the memory block
    (`memory_block`, already fitted to the budget: core/memory.py), recalled fragments,
    then the newest `memory_window` thread messages. Over budget, recalled fragments go first
    (lowest score first), then the oldest thread messages; the system text and the newest
    thread message always stay, so the model always sees what it is answering. Superseded
    answers (and `leave_out`) and the offline stand-in's answers are not part of the
    thread.

    Tool steps (core/tool_calls.py) are kept or dropped as whole groups, calls cut short
    are answered `interrupted`, and results are capped at `max_tool_result_chars`.
    """
    if memory_window < 1:
        raise ValueError("memory_window must be at least 1")
    thread = without_superseded(thread, leave_out)
    if client_system is None:
        client_system = client_system_of(thread)

    def cost(text: str) -> int:
        return count_tokens(text) + MESSAGE_OVERHEAD_TOKENS

    fixed: list[ContextMessage] = []
    if system_prompt:
        fixed.append(ContextMessage("system", system_prompt, "system_prompt"))
    for item in context_files:
        fixed.append(ContextMessage("system", item.content, f"context_file:{item.name}"))
    for text in client_system:
        fixed.append(ContextMessage("system", text, CLIENT_SYSTEM))
    if memory_block:
        fixed.append(ContextMessage("system", memory_block, MEMORY_SOURCE))

    tail = list(thread[-memory_window:])
    if has_tool_steps(tail):
        groups = window_groups(paired_groups(tail, max_tool_result_chars), memory_window)
    else:  # the common text-only thread: one message per group, no pairing to do
        groups = [[ContextMessage(m.role.value, m.content, m.message_id)] for m in tail]
    kept_recall = sorted(recalled, key=lambda f: f.score, reverse=True)

    def total() -> int:
        parts = [cost(m.content) for m in (*fixed, *flatten(groups))]
        parts.extend(cost(m.content) for m in recalled_messages(kept_recall))
        return sum(parts)

    dropped = 0
    if token_budget is not None:
        while kept_recall and total() > token_budget:
            kept_recall.pop()
        while len(groups) > 1 and total() > token_budget:
            dropped += len(groups.pop(0))

    messages = list(fixed)
    messages.extend(recalled_messages(kept_recall))
    messages.extend(flatten(groups))
    return AssembledContext(
        messages=tuple(messages),
        token_estimate=total(),
        dropped_messages=dropped,
        recall=recall_metadata(kept_recall),
    )
