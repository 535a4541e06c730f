"""Configuration of an agent's memory (`[agents.<name>.memory]`, DESIGN.md §13): which
memory items enter its turns (`inject`, `max_items`) and whether the control model keeps
them up to date after turns (`extract`, `extract_model`). Resolved field by field under
`[agents.defaults.memory]` by `memory_policy`; the rules are core/memory.py."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from sessiongate.config.base import Section
from sessiongate.core.memory import DEFAULT_MAX_ITEMS, InjectPolicy


class MemoryConfig(Section):
    #: `off`: no item enters a turn. `pinned` (default): pinned items always. `relevant`:
    #: pinned items and the best `max_items` others by hybrid search on the new message.
    inject: InjectPolicy | None = None
    #: The most relevant (unpinned) items a turn receives with `inject = "relevant"`.
    max_items: int | None = Field(None, ge=0, le=100)
    #: After a turn and before a compaction, the control model adds, updates or
    #: invalidates items from the new exchange (off by default).
    extract: bool | None = None
    #: The model extraction asks (unset: the agent's control model).
    extract_model: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryPolicy:
    """An agent's memory settings once `[agents.defaults.memory]` and its own merge."""

    inject: InjectPolicy = "pinned"
    max_items: int = DEFAULT_MAX_ITEMS
    extract: bool = False
    extract_model: str | None = None


DEFAULT_MEMORY_POLICY = MemoryPolicy()


def memory_policy(defaults: MemoryConfig | None, own: MemoryConfig | None) -> MemoryPolicy:
    """`[agents.defaults.memory]` field by field under `[agents.<name>.memory]`."""
    merged: dict[str, object] = {}
    for section in (defaults, own):
        if section is not None:
            merged.update(section.model_dump(exclude_none=True))
    config = MemoryConfig.model_validate(merged)
    return MemoryPolicy(
        inject=config.inject or "pinned",
        max_items=DEFAULT_MAX_ITEMS if config.max_items is None else config.max_items,
        extract=bool(config.extract),
        extract_model=config.extract_model,
    )
