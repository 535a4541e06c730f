"""Configuration of an agent's working set (`[agents.<name>.context]`): the part of the
window kept for the reply, compaction on or off, when it starts, what stays raw.
Resolved by service/agents.py; the rules are core/budgets.py and core/working_set.py."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from sessiongate.config.base import Section

Compaction = Literal["auto", "off"]
CarryOver = Literal["off", "summary"]


class WorkingSetConfig(Section):
    #: Tokens of the window kept for the reply (unset: `min(4096, window / 4)`).
    reserve_tokens: int | None = Field(None, ge=16, le=10_000_000)
    #: `auto`: the context fits the model's budget (older messages summarised, or
    #: trimmed and announced). `off`: `memory_window` is a hard window, as seed 004 wants.
    compaction: Compaction | None = None
    #: The share of the budget past which the oldest part is compacted.
    compact_at: float | None = Field(None, gt=0.1, le=1.0)
    #: The newest messages a compaction always leaves raw.
    keep_recent: int | None = Field(None, ge=1, le=1000)
    #: The model that writes summaries (unset: the control model, else the reply model).
    summary_model: str | None = None
    #: `summary`: a rotation by idle, day boundary or topic starts the new segment's
    #: context with a summary of the previous one. `off` (the default): seed 003 D1.
    carry_over: CarryOver | None = None
