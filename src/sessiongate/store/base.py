"""The store ports. The services talk only to these protocols; adapters implement them
(SQLite: store/sqlite/store.py, store/sqlite/users.py; PostgreSQL: store/postgres/store.py,
store/postgres/users.py).

Methods are async so a network database can implement them without blocking; the SQLite
adapter answers inline because a local WAL write costs less than a thread hop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sessiongate.core.keys import KeyRef
from sessiongate.core.quotas import QuotaLimits
from sessiongate.core.segments import (
    KeySummary,
    Message,
    MessageStatus,
    RecallFragment,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.core.users import User
from sessiongate.store.exchange import ChainRecords


class Row(Protocol):
    """A fetched row read by position: a tuple from sqlite3, a Record from asyncpg."""

    def __getitem__(self, index: int, /) -> Any: ...


class Store(Protocol):
    async def get_key(self, key: KeyRef) -> SessionKeyRecord | None: ...

    async def create_key(
        self, key: KeyRef, session_id: str, now: datetime, *, max_keys: int | None = None
    ) -> tuple[SessionKeyRecord, Segment]:
        """Create `key` with its first (latest) segment. Raises KeyExists; with
        `max_keys`, KeyLimitReached when the owner already has that many keys (counted
        and created atomically: concurrent creations never pass the cap)."""
        ...

    async def get_segment(self, session_id: str) -> Segment | None: ...

    async def latest_segment(self, key: KeyRef) -> Segment:
        """Raises SessionNotFound."""
        ...

    async def chain(self, key: KeyRef) -> list[Segment]:
        """All segments of `key`, oldest first."""
        ...

    async def rotate(
        self,
        key: KeyRef,
        *,
        expected_latest: str,
        new_session_id: str,
        reason: RotationReason,
        now: datetime,
        confidence: float | None = None,
        deciding_model: str | None = None,
        continues: Sequence[str] = (),
        extra_parents: Sequence[str] = (),
        max_segments: int | None = None,
    ) -> tuple[Segment, RotationRecord]:
        """Archive the latest segment, create the next one and move the pointer, atomically.

        Raises Conflict when the latest segment is no longer `expected_latest`; with
        `max_segments`, SegmentLimitReached when the key already holds that many (nothing
        changes).
        """
        ...

    async def clear_in_place(
        self, key: KeyRef, *, expected_latest: str, reason: RotationReason, now: datetime
    ) -> tuple[Segment, RotationRecord]:
        """Legacy mode: start the context afresh in the same segment. Nothing is deleted."""
        ...

    async def append_message(
        self,
        session_id: str,
        *,
        role: Role,
        content: str,
        now: datetime,
        status: MessageStatus = MessageStatus.COMPLETE,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        """Append to a latest segment. Raises ImmutableSegment for an archived one."""
        ...

    async def thread_tail(self, segment: Segment, limit: int) -> list[Message]:
        """The newest `limit` messages of the segment's thread, oldest first.

        The thread is the segment's own messages after any in-place clear, preceded by
        the threads of the segments it explicitly continues (revert continuations).
        """
        ...

    async def list_messages(
        self, session_id: str, *, after_seq: int = 0, limit: int = 100
    ) -> list[Message]: ...

    async def rotations(self, key: KeyRef) -> list[RotationRecord]: ...

    async def recall(
        self,
        key: KeyRef,
        query: str,
        *,
        rationale: str,
        limit: int = 5,
        exclude_session_ids: Iterable[str] = (),
    ) -> list[RecallFragment]:
        """Full-text search over the archived segments of `key`."""
        ...

    async def list_keys(
        self, owner: str | None = None, *, after: KeyRef | None = None, limit: int | None = None
    ) -> list[KeySummary]:
        """Keys in storage-id order (owner, then name; byte order), only `owner`'s when
        given, starting after `after`, at most `limit` of them (store/key_listing.py)."""
        ...

    async def count_keys(self) -> int:
        """How many session keys exist (all owners)."""
        ...

    async def set_overrides(self, key: KeyRef, overrides: dict[str, Any]) -> SessionKeyRecord: ...

    async def set_title(self, key: KeyRef, title: str | None) -> SessionKeyRecord:
        """Set the key's title (None: back to the automatic one, core/titles.py).
        Raises SessionNotFound."""
        ...

    async def delete_key(self, key: KeyRef) -> None:
        """Erase a key and its whole chain. Raises SessionNotFound."""
        ...

    async def export_chain(self, key: KeyRef) -> ChainRecords: ...

    async def import_chain(
        self,
        records: ChainRecords,
        new_session_id: Callable[[], str],
        *,
        max_keys: int | None = None,
    ) -> ChainRecords:
        """Insert a whole chain in one transaction, under `records.key.ref`, and return it
        as written: segment ids already taken get `new_session_id()`. Raises KeyExists,
        and KeyLimitReached as `create_key` does."""
        ...

    def on_key_changed(self, callback: Callable[[KeyRef | None], None]) -> None:
        """Call `callback(key)` when another process erases or imports `key`, and
        `callback(None)` when such news may have been missed."""
        ...

    async def close(self) -> None: ...


class UserStore(Protocol):
    async def add_user(self, user: User, now: datetime) -> None:
        """Raises Conflict (user_exists, primary_exists)."""
        ...

    async def add_key(self, key_id: str, user_name: str, digest: str, now: datetime) -> None: ...

    async def find_key(self, key_id: str) -> tuple[User, str] | None:
        """The user and stored digest for an unrevoked key id."""
        ...

    async def get_user(self, name: str) -> User | None: ...

    async def list_users(self) -> list[User]:
        """Every user, by name."""
        ...

    async def set_quotas(self, name: str, quotas: QuotaLimits) -> User | None:
        """Set the user's own quotas (None: the default applies); the user as it now is,
        None for an unknown user."""
        ...

    async def active_key_counts(self) -> dict[str, int]:
        """Unrevoked API keys per user name (users without one are left out)."""
        ...

    async def revoke_keys(self, user_name: str, now: datetime) -> int:
        """Revoke every unrevoked key of the user in one statement; how many."""
        ...

    async def replace_keys(self, key_id: str, user_name: str, digest: str, now: datetime) -> int:
        """In one transaction: revoke every key of the user and add this one; how many
        were revoked."""
        ...
