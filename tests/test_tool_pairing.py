"""Property tests: whatever a thread holds (tool steps cut short, killed mid-step, orphan
results, any window or token budget), the context a model gets is a valid thread."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from sessiongate.core.context import assemble_context
from sessiongate.core.segments import Message, MessageStatus, Role
from sessiongate.core.tool_calls import INTERRUPTED_RESULT, cap_result

AT = datetime(2026, 1, 1, tzinfo=UTC)


def build(events: list[tuple[str, Any]]) -> list[Message]:
    """A thread from a script: ("user", text) | ("answer", text) | ("step", (n_calls,
    n_results_kept, shuffled, orphan))."""
    messages: list[Message] = []

    def add(role: Role, content: str, metadata: dict[str, Any]) -> None:
        messages.append(
            Message("s", len(messages) + 1, role, content, MessageStatus.COMPLETE, AT, metadata)
        )

    for kind, value in events:
        if kind == "user":
            add(Role.USER, value, {})
        elif kind == "answer":
            add(Role.ASSISTANT, value, {})
        else:
            calls, kept, reverse, orphan = value
            ids = [f"c{len(messages)}_{i}" for i in range(calls)]
            add(
                Role.ASSISTANT,
                "",
                {"tool_calls": [{"id": i, "name": "t", "arguments": "{}"} for i in ids]},
            )
            answered = ids[:kept]
            if reverse:
                answered = list(reversed(answered))
            for call_id in answered:
                add(Role.TOOL, "r" * 50, {"tool_call_id": call_id, "name": "t", "status": "ok"})
            if orphan:
                add(Role.TOOL, "stray", {"tool_call_id": "nobody", "name": "t"})
    return messages


step = st.tuples(st.integers(1, 4), st.integers(0, 4), st.booleans(), st.booleans()).map(
    lambda v: ("step", (v[0], min(v[1], v[0]), v[2], v[3]))
)
event = st.one_of(
    st.text(min_size=1, max_size=30).map(lambda t: ("user", t)),
    st.text(min_size=1, max_size=30).map(lambda t: ("answer", t)),
    step,
)


def assert_valid(wire: list[dict[str, Any]]) -> None:
    i = 0
    while i < len(wire):
        message = wire[i]
        assert message["role"] != "tool", f"a result with no call before it at {i}"
        calls = message.get("tool_calls") or []
        i += 1
        for call in calls:
            assert i < len(wire), "a call without its result at the end"
            result = wire[i]
            assert result["role"] == "tool" and result["tool_call_id"] == call["id"]
            i += 1


@settings(max_examples=300, deadline=None)
@given(
    st.lists(event, max_size=40),
    st.integers(1, 60),
    st.one_of(st.none(), st.integers(256, 4000)),
)
def test_every_context_is_a_valid_thread(
    events: list[tuple[str, Any]], window: int, budget: int | None
) -> None:
    thread = build([*events, ("user", "the new message")])  # a turn ends its thread
    context = assemble_context(
        thread=thread, memory_window=window, token_budget=budget, max_tool_result_chars=30
    )
    wire = context.to_wire()
    assert_valid(wire)
    assert len(wire) >= 1
    # The newest message always stays (as itself, or inside its whole step).
    newest = thread[-1]
    sources = [m.source for m in context.messages]
    if newest.role is not Role.TOOL:
        assert newest.message_id in sources
    # Results are capped for the model; a repaired call says it was interrupted.
    for message in wire:
        if message["role"] == "tool":
            assert len(message["content"]) <= 30 or message["content"] == INTERRUPTED_RESULT
    # Text-only models get the same history with steps written as text: no tool roles.
    inline = context.to_wire(inline_tool_steps=True)
    assert all(m["role"] != "tool" and "tool_calls" not in m for m in inline)


@given(st.text(max_size=500), st.integers(40, 300))
def test_a_capped_result_keeps_head_and_tail_within_the_limit(text: str, limit: int) -> None:
    capped = cap_result(text, limit)
    if len(text) <= limit:
        assert capped == text
    else:
        assert len(capped) <= limit and "characters cut" in capped
        head = capped.split("\n[…")[0]
        assert text.startswith(head)
