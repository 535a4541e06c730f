"""Context assembly: window, budget and recall, as a pure function."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from sessiongate.core.context import assemble_context, estimate_tokens
from sessiongate.core.segments import Message, MessageStatus, RecallFragment, Role

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def thread(n: int, size: int = 40) -> list[Message]:
    return [
        Message(
            "s",
            i + 1,
            Role.USER if i % 2 == 0 else Role.ASSISTANT,
            f"m{i} " + "x" * size,
            MessageStatus.COMPLETE,
            NOW,
        )
        for i in range(n)
    ]


def fragment(score: float, text: str = "old fact") -> RecallFragment:
    return RecallFragment("old", f"old:{score}", 1, Role.USER, text, score, "asked", NOW)


def test_window_keeps_the_newest_messages_in_order() -> None:
    ctx = assemble_context(thread=thread(10), memory_window=4)
    assert [m.content.split()[0] for m in ctx.messages] == ["m6", "m7", "m8", "m9"]


def test_budget_drops_recall_before_history_and_keeps_newest_message() -> None:
    msgs = thread(6, size=400)  # about 100 tokens each
    frags = [fragment(1.0, "y" * 400), fragment(2.0, "z" * 400)]
    roomy = assemble_context(thread=msgs, memory_window=50, recalled=frags, token_budget=10_000)
    assert len(roomy.recall) == 2 and roomy.dropped_messages == 0
    tight = assemble_context(
        thread=msgs, memory_window=50, recalled=frags, token_budget=450, system_prompt="sys"
    )
    assert tight.recall == ()
    assert tight.messages[0].source == "system_prompt"
    assert tight.messages[-1].content.startswith("m5")
    assert tight.token_estimate <= 450 and tight.dropped_messages > 0
    tiny = assemble_context(thread=msgs, memory_window=50, token_budget=1)
    assert [m.content.split()[0] for m in tiny.messages] == ["m5"]


def test_recall_keeps_the_highest_scores_and_their_rationale() -> None:
    ctx = assemble_context(
        thread=thread(2), memory_window=5, recalled=[fragment(0.5), fragment(3.0)]
    )
    assert [r["score"] for r in ctx.recall] == [3.0, 0.5]
    block = next(m for m in ctx.messages if m.source == "recall")
    assert "why: asked" in block.content


def test_estimate_tokens_counts_wide_characters_conservatively() -> None:
    assert estimate_tokens("abcd" * 10) == 10
    assert estimate_tokens("漢字" * 5) == 10


def test_memory_window_must_be_positive() -> None:
    with pytest.raises(ValueError, match="memory_window"):
        assemble_context(thread=thread(1), memory_window=0)
