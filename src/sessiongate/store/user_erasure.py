"""The UserErasureStore port: remove, in one transaction, every row a user owns that no
other erasure path removes (SQLite: store/sqlite/user_erasure.py; PostgreSQL:
store/postgres/user_erasure.py). Session keys, artifacts and tasks go first through their
own services (service/user_erasure.py); this is the last step, and it ends with the
user's row, so an erasure that stops half-way can simply be run again."""

from __future__ import annotations

from typing import Protocol

#: The tables the final step clears, in the order it clears them, each with the column
#: naming the user. Notes go before their versions row (the chunks' triggers bump it),
#: memory vectors before their items,
#: and the user's row last (its API keys, and on SQLite its mode unlocks, reference it).
OWNED_TABLES: tuple[tuple[str, str], ...] = (
    ("note_chunks", "owner"),
    ("notes", "owner"),
    ("notes_versions", "owner"),
    ("memory_vectors", "owner"),
    ("memory_items", "owner"),
    ("memory_tombstones", "owner"),
    ("mode_unlocks", "user_name"),
    ("idempotency_keys", "owner"),
    ("responses", "owner"),
    ("conversation_objects", "owner"),
    ("endpoint_last_key", "owner"),
    ("conversation_nodes", "owner"),
    ("conversation_heads", "owner"),
    ("hook_deliveries", "owner"),
    ("tasks", "owner"),
    ("quota_counters", "user_name"),
    ("artifact_chunks", "owner"),
    ("api_keys", "user_name"),
    ("users", "name"),
)


class UserErasureStore(Protocol):
    async def erase_owner_rows(self, owner: str) -> dict[str, int]:
        """Delete the owner's rows from every table of OWNED_TABLES in one transaction;
        how many rows each table lost (tables that lost none are left out)."""
        ...

    async def owned_key_names(self, owner: str) -> list[str]:
        """The names of the session keys the owner still has."""
        ...
