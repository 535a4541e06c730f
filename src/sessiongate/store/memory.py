"""The memory store port (DESIGN.md §13): a user's memory items, a keyword index over
their text, their embedding vectors, and the tombstones of what the user forgot or
edited away. SQLite: store/sqlite/memory.py; PostgreSQL: store/postgres/memory.py.

Every method takes the owner and answers only from the owner's rows: another user's item
is invisible, exactly like an id that never existed. An item's text is never changed in
place (an update keeps a new item and marks the old one in the same transaction); only
`pinned`, `scope`, `edited_at`, `invalid_at` and `superseded_by` change.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from sessiongate.core.memory import MemoryItem, MemorySource, text_fingerprint
from sessiongate.core.notes import Vectors
from sessiongate.errors import Conflict
from sessiongate.store.base import Row
from sessiongate.store.notes import ChunkVectors

TombstoneReason = Literal["forgotten", "edited"]


class MemoryLimitReached(Conflict):
    """The owner already keeps `[limits] max_memory_items_per_user` valid items."""

    code = "memory_limit_reached"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"you have {limit} memory items, the most one user may keep here; forget some"
            " (DELETE /v1/memory/{id}) or ask the operator to raise"
            " [limits] max_memory_items_per_user"
        )


class MemoryChanged(Conflict):
    """The item an update supersedes was changed or forgotten meanwhile."""

    code = "memory_changed"

    def __init__(self) -> None:
        super().__init__("the memory item changed meanwhile; read it again and retry")


#: The item columns both stores write and select, in the order `item_from_row` reads.
ITEM_COLUMNS = (
    "memory_id, owner, text, scope, pinned, source_key, source_session_id,"
    " source_message_ids, created_by, created_at, invalid_at, superseded_by, edited_at"
)


def source_columns(source: MemorySource | None) -> tuple[str | None, str | None, str | None]:
    """A source as its three columns (the message ids as a JSON array)."""
    if source is None:
        return None, None, None
    return source.key, source.session_id, json.dumps(list(source.message_ids))


@dataclass(frozen=True, slots=True)
class Tombstone:
    """What the user forgot or edited away: its text's fingerprint and its source."""

    text_hash: str
    source: MemorySource | None
    reason: TombstoneReason


def forgotten(item: MemoryItem) -> Tombstone:
    """The tombstone a forgotten item leaves: its text's fingerprint and its source."""
    return Tombstone(text_fingerprint(item.text), item.source, "forgotten")


#: The tombstone columns both stores select, in the order `tombstone_from_row` reads.
TOMBSTONE_COLUMNS = "text_hash, source_key, source_message_ids, reason"


def tombstone_from_row(row: Row) -> Tombstone:
    """A row of `TOMBSTONE_COLUMNS`."""
    return Tombstone(row[0], source_from(row[1], None, row[2]), row[3])


#: The item and every earlier version it superseded, by row id (both stores' SQL).
CHAIN_SQL = """
WITH RECURSIVE chain (id, memory_id) AS (
    SELECT id, memory_id FROM memory_items WHERE owner = {owner} AND memory_id = {memory_id}
    UNION ALL
    SELECT m.id, m.memory_id FROM memory_items m JOIN chain c ON m.superseded_by = c.memory_id
    WHERE m.owner = {owner}
)
SELECT id FROM chain
"""


def source_from(key: Any, session_id: Any, message_ids: Any) -> MemorySource | None:
    if key is None:
        return None
    ids = json.loads(message_ids) if isinstance(message_ids, str) else (message_ids or [])
    return MemorySource(str(key), session_id, tuple(str(i) for i in ids))


def item_values(item: MemoryItem, to_time: Callable[[datetime], Any]) -> tuple[Any, ...]:
    """The item as the values of `ITEM_COLUMNS`, in order (what `item_from_row` reads
    back); `to_time` writes the store's time."""
    key, session_id, message_ids = source_columns(item.source)
    invalid_at = None if item.invalid_at is None else to_time(item.invalid_at)
    edited_at = None if item.edited_at is None else to_time(item.edited_at)
    return (
        item.memory_id,
        item.user,
        item.text,
        item.scope,
        item.pinned,
        key,
        session_id,
        message_ids,
        item.created_by,
        to_time(item.created_at),
        invalid_at,
        item.superseded_by,
        edited_at,
    )


def item_from_row(row: Row, to_time: Callable[[Any], datetime]) -> MemoryItem:
    """A row of `ITEM_COLUMNS`; `to_time` reads the store's stored time."""
    return MemoryItem(
        memory_id=row[0],
        user=row[1],
        text=row[2],
        scope=row[3],
        pinned=bool(row[4]),
        source=source_from(row[5], row[6], row[7]),
        created_by=row[8],
        created_at=to_time(row[9]),
        invalid_at=None if row[10] is None else to_time(row[10]),
        superseded_by=row[11],
        edited_at=None if row[12] is None else to_time(row[12]),
    )


class MemoryStore(Protocol):
    async def add_item(
        self,
        item: MemoryItem,
        vector: Vectors | None,
        embedder: str | None,
        *,
        max_items: int | None = None,
        supersedes: MemoryItem | None = None,
        tombstone: Tombstone | None = None,
    ) -> None:
        """Keep `item` (with its vector when given), in one transaction. `supersedes`: the
        old item as it is stored from now on (invalid_at, superseded_by set), written in
        the same transaction. `tombstone`: recorded with it (a user's edit). `max_items`:
        raise MemoryLimitReached, writing nothing, when the owner would keep more valid
        items than that (a superseding write does not add to the count)."""
        ...

    async def get_item(self, owner: str, memory_id: str) -> MemoryItem | None:
        """None when the owner has no such item (unknown, or someone else's)."""
        ...

    async def list_items(
        self,
        owner: str,
        *,
        include_invalid: bool,
        scope: str | None,
        limit: int,
        before: str | None,
    ) -> list[MemoryItem]:
        """The owner's items, newest first; `before`: only items older than that id."""
        ...

    async def valid_items(self, owner: str, *, pinned_only: bool = False) -> list[MemoryItem]:
        """Every valid item of the owner (or only the pinned ones), oldest first: what a
        turn chooses from."""
        ...

    async def update_item(
        self, owner: str, memory_id: str, *, pinned: bool, scope: str, edited_at: datetime
    ) -> bool:
        """Change what is not content, in place; False when the owner has no such item."""
        ...

    async def invalidate_item(
        self, owner: str, memory_id: str, invalid_at: datetime
    ) -> MemoryItem | None:
        """Mark a valid item invalid without a successor; the item as it was, or None when
        the owner has no such valid item."""
        ...

    async def forget_item(self, owner: str, memory_id: str, now: datetime) -> list[MemoryItem]:
        """Delete the item, the earlier versions it superseded (their chain), and their
        vectors, recording a `forgotten` tombstone of each (fingerprint and source only),
        in one transaction. The items as they were, the named one first; empty when the
        owner has no such item."""
        ...

    async def tombstones(self, owner: str, text_hash: str) -> list[Tombstone]:
        """The owner's tombstones of one text fingerprint."""
        ...

    async def keyword_items(self, owner: str, words: Sequence[str], limit: int) -> list[int]:
        """Row ids of the owner's VALID items holding any of `words`, best match first."""
        ...

    async def item_vectors(self, owner: str, embedder: str, dimensions: int) -> ChunkVectors:
        """Every vector `embedder` made for the owner's valid items, in row-id order."""
        ...

    async def items_by_row(self, owner: str, row_ids: Sequence[int]) -> dict[int, MemoryItem]:
        """The owner's items among `row_ids`, by row id; others are left out."""
        ...

    async def import_items(
        self,
        owner: str,
        items: Sequence[MemoryItem],
        vectors: Vectors | None,
        embedder: str | None,
        *,
        max_items: int | None,
    ) -> None:
        """Keep imported items (new ids already given; `vectors[i]` for `items[i]` when
        given) in one transaction, all or nothing: MemoryLimitReached when the owner would
        keep more valid items than `max_items`."""
        ...
