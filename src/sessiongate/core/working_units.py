"""A thread cut into the working set's units, and the units chosen put back into the
messages a context sends. Pure.

A unit is what core/tool_calls.py pairs into one group: a plain message, or an assistant
message that called tools with one result per call (a missing result answered
`interrupted`). An orphan result, which the pairing leaves out, belongs to the unit
before it (so every seq of the thread is in exactly one unit).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

from sessiongate.core.segments import Message
from sessiongate.core.tool_calls import ThreadItem, has_tool_steps, paired_groups
from sessiongate.core.working_set import Unit

#: Per-message framing the chat formats add (as core/context.py counts it).
MESSAGE_OVERHEAD_TOKENS = 4


@dataclass(frozen=True, slots=True)
class ThreadUnit:
    unit: Unit
    items: tuple[ThreadItem, ...]


def thread_units(
    thread: Sequence[Message],
    *,
    max_result_chars: int,
    count_tokens: Callable[[str], int],
    pinned: Collection[int] = (),
) -> list[ThreadUnit]:
    """The thread (oldest first) as units with their cost in tokens."""

    def cost(items: Sequence[ThreadItem]) -> int:
        return sum(count_tokens(i.content) + MESSAGE_OVERHEAD_TOKENS for i in items)

    pins = set(pinned)
    if not has_tool_steps(thread):  # the common text-only thread
        units = []
        for m in thread:
            item = ThreadItem(m.role.value, m.content, m.message_id)
            units.append(ThreadUnit(Unit((m.seq,), cost((item,)), m.seq in pins), (item,)))
        return units
    seq_of = {m.message_id: m.seq for m in thread}
    groups = paired_groups(thread, max_result_chars)
    owned: list[list[int]] = []
    for group in groups:
        owned.append(sorted(seq_of[i.source] for i in group if i.source in seq_of))
    placed = {s for seqs in owned for s in seqs}
    for message in thread:  # orphans: with the unit before them (else the first)
        if message.seq in placed or not owned:
            continue
        index = 0
        for k, seqs in enumerate(owned):
            if seqs and seqs[0] < message.seq:
                index = k
        owned[index] = sorted([*owned[index], message.seq])
    return [
        ThreadUnit(Unit(tuple(seqs), cost(group), any(s in pins for s in seqs)), tuple(group))
        for seqs, group in zip(owned, groups, strict=True)
        if seqs
    ]
