"""The pinned items a turn receives are read once per user and `PINNED_TTL_SECONDS`, not
on every turn (most users have none, and the read was the one query injection added to
every turn); a write through this process, or the user's erasure, drops them at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings
from sessiongate.config.memory import MemoryPolicy
from sessiongate.core.clock import ManualClock
from sessiongate.service import memory as memory_module
from sessiongate.service.engine import build_engine
from sessiongate.service.user_erasure import user_erasure
from tests.conftest import START

PINNED = MemoryPolicy(inject="pinned")


async def test_pinned_items_are_read_once_and_dropped_by_a_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = build_engine(
        Settings(data_dir=tmp_path, lifecycle={"timezone": "UTC"}), clock=ManualClock(START)
    )
    await engine.start()
    try:
        memory = engine.memory
        assert memory is not None
        reads: list[str] = []
        valid_items = memory.store.valid_items

        async def counting(user: str, **kwargs: Any) -> Any:
            reads.append(user)
            return await valid_items(user, **kwargs)

        monkeypatch.setattr(memory.store, "valid_items", counting)

        async def turn_items(user: str = "alice") -> list[str]:
            chosen = await memory.items_for_turn(user, "main", PINNED, "chat", "hello")
            return [i.item.text for i in chosen]

        assert await turn_items() == []
        assert await turn_items() == []
        assert reads == ["alice"]  # the second turn read nothing

        kept = await memory.add("alice", "likes tea", pinned=True)
        assert await turn_items() == ["likes tea"]  # the write dropped what was held
        assert len(reads) == 2
        await memory.patch("alice", kept.memory_id, pinned=False)
        assert await turn_items() == []

        # Past the time to live, a write elsewhere (another gateway, the CLI) shows.
        monkeypatch.setattr(memory_module, "PINNED_TTL_SECONDS", 0.0)
        await memory.store.update_item(
            "alice", kept.memory_id, pinned=True, scope="user", edited_at=START
        )
        assert await turn_items() == ["likes tea"]

        # Erasing the user leaves nothing of theirs held.
        monkeypatch.setattr(memory_module, "PINNED_TTL_SECONDS", 3600.0)
        assert await turn_items() == ["likes tea"]
        await engine.users.add("alice")
        await user_erasure(engine).erase("alice", by="operator")
        assert await turn_items() == []
    finally:
        await engine.aclose()
