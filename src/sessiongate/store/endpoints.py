"""The seed endpoint store port: which key a user last used on `/api/claude/ws` or
`/api/codex/ws`, and which of the two endpoints a key belongs to (DESIGN.md §11).

The last key is a row of its own (`endpoint_last_key`, deleted with its key). A key's
endpoint is not stored anywhere new: it is read from the key's first message, whose
metadata names the transport that created the key (`"transport": "claude"`), so it holds
from the moment the key exists, travels with an export, and goes with an erasure.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from sessiongate.core.keys import KeyRef


class EndpointStore(Protocol):
    async def record_last_key(self, key: KeyRef, endpoint: str, now: datetime) -> None:
        """`key` is the newest key its owner used on `endpoint` (as of `now`; an older
        `now` than the row's never wins). Nothing happens if the key no longer exists."""
        ...

    async def last_key(self, owner: str, endpoint: str) -> str | None:
        """The name of the key `owner` last used on `endpoint`; None if none (or erased)."""
        ...

    async def forget_key(self, key: KeyRef) -> None:
        """`key` was erased: no endpoint's last key any more."""
        ...

    async def created_through(self, key: KeyRef) -> str | None:
        """The `transport` of the key's first message (seq 1 of its first segment), ""
        when that message names none (REST, an import); None for a key that does not
        exist or has no message yet."""
        ...

    async def count_created_through(self) -> dict[str, int]:
        """How many keys (all owners) each seed endpoint created: `{"claude": n, "codex": m}`."""
        ...
