"""A user with no pinned item is believed to have none for `PINNED_TTL_SECONDS`, so their
turns do not each pay a read for an empty list (most users; the read was the one query
injection added to every turn). A user who has pinned items is read on every turn, so a
forget or an unpin made anywhere (another gateway, the CLI) holds for the very next turn;
a write through this process, or the user's erasure, ends the belief at once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sessiongate.config import Settings
from sessiongate.config.memory import MemoryPolicy
from sessiongate.core.clock import ManualClock
from sessiongate.core.memory import MemoryItem
from sessiongate.service import memory_injection as memory_module
from sessiongate.service.engine import build_engine
from sessiongate.service.user_erasure import user_erasure
from tests.conftest import START

PINNED = MemoryPolicy(inject="pinned")


async def test_no_pinned_items_is_read_once_and_pinned_ones_every_turn(
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
            chosen = await memory.injection.items_for_turn(user, "main", PINNED, "chat", "hello")
            return [i.item.text for i in chosen]

        assert await turn_items() == []
        assert await turn_items() == []
        assert reads == ["alice"]  # the second turn read nothing

        # Pinned through this process: the next turn has it, and every turn reads.
        kept = await memory.add("alice", "likes tea", pinned=True)
        assert await turn_items() == ["likes tea"]
        assert await turn_items() == ["likes tea"]
        assert len(reads) == 3

        # Unpinned behind this process's back (another gateway, the CLI): the very
        # next turn no longer has it.
        await memory.store.update_item(
            "alice", kept.memory_id, pinned=False, scope="user", edited_at=START
        )
        assert await turn_items() == []

        # Pinned behind its back while "none" is believed: it shows once that lapses.
        await memory.store.update_item(
            "alice", kept.memory_id, pinned=True, scope="user", edited_at=START
        )
        assert await turn_items() == []
        monkeypatch.setattr(memory_module, "PINNED_TTL_SECONDS", 0.0)
        assert await turn_items() == ["likes tea"]

        # Erasing a user who had none leaves nothing believed about the name.
        monkeypatch.setattr(memory_module, "PINNED_TTL_SECONDS", 3600.0)
        assert await turn_items("bob") == []
        await engine.users.add("bob")
        await user_erasure(engine).erase("bob", by="operator")
        await memory.store.add_item(
            MemoryItem(
                memory_id="mem_" + "0" * 31 + "1",
                user="bob",
                text="new bob likes maps",
                scope="user",
                pinned=True,
                source=None,
                created_by="user",
                created_at=START,
            ),
            None,
            None,
        )
        assert await turn_items("bob") == ["new bob likes maps"]
    finally:
        await engine.aclose()
