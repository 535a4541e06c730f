"""What a summariser is asked to write for a compaction (core/working_set.py). Pure.

The summariser reads the summary in force (which it folds) and the units of the span,
each message tagged with its seq, so the summary can be checked against what it cites.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sessiongate.core.tool_calls import ThreadItem

SUMMARY_INSTRUCTIONS = (
    "You compact the earlier part of a conversation so that an assistant can continue it "
    "without the original messages. Write a faithful summary in the conversation's "
    "language: the user's goals and preferences, facts, names, numbers, decisions, what "
    "tools did and found, and what is still open. Refer to messages by their #seq where "
    "it helps. Do not invent anything; do not answer the user. Plain text, at most "
    "{limit} words."
)


def summary_request(
    previous: str | None,
    items: Sequence[tuple[int, ThreadItem]],
    *,
    instructions: str | None = None,
    limit_words: int = 400,
) -> list[dict[str, Any]]:
    """The wire messages for one summary: the instructions, then the text to summarise
    (`items` are `(seq, item)`; a tool step's calls and results as lines)."""
    lines: list[str] = []
    if previous:
        lines.append(f"Summary so far (it already covers the messages before these):\n{previous}")
        lines.append("")
    lines.append("Messages to add to it:")
    for seq, item in items:
        if item.tool_calls:
            calls = ", ".join(f"{c.name}({c.arguments})" for c in item.tool_calls)
            text = (item.content + " " if item.content else "") + f"[calls {calls}]"
        elif item.tool_call_id is not None:
            text = f"[tool {item.name} → {item.status}] {item.content}"
        else:
            text = item.content
        lines.append(f"#{seq} {item.role}: {text}")
    system = SUMMARY_INSTRUCTIONS.format(limit=limit_words)
    if instructions:
        system += f"\nThe user asked the summary to: {instructions}"
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "\n".join(lines)},
    ]


_COMPACT_RE = re.compile(r"\s*/compact(?:\s+(?P<instructions>.*?))?\s*", re.DOTALL)


def parse_compact_command(content: str) -> str | None:
    """`/compact` alone (""), or `/compact <instructions>` (the instructions); None for
    any other text (`/compacted`, `x /compact`)."""
    match = _COMPACT_RE.fullmatch(content)
    if match is None:
        return None
    return (match["instructions"] or "").strip()
