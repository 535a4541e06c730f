"""The idempotency store port: one row per (owner, idempotency key) (service/idempotency.py).

Every method takes the owner: another user's key is invisible, and two users' equal keys
are two rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True, slots=True)
class IdempotencyRecord:
    owner: str
    key: str
    #: A hash of the request's meaningful fields: the same key with another body is refused.
    fingerprint: str
    #: running (claimed, the turn has not ended) | done (`result` holds the outcome).
    status: str
    result: dict[str, Any] | None
    created_at: datetime
    #: A `running` row whose claiming process is gone (PostgreSQL: its liveness lock is
    #: not held) after its turn started: `result` then names the turn (`turn_id`), and
    #: the service answers from what that turn stored, or releases the row.
    abandoned: bool = False


class IdempotencyStore(Protocol):
    async def claim(
        self, owner: str, key: str, fingerprint: str, now: datetime, stale_before: datetime
    ) -> IdempotencyRecord | None:
        """Claim the key with a `running` row. None: claimed, the caller runs the turn.
        Otherwise the row already there (this caller must not run the turn). A `running`
        row made before `stale_before` (its process died) is taken over, and so is one
        whose process is known to be gone before its turn started; one whose turn had
        started comes back `abandoned`."""
        ...

    async def started(self, owner: str, key: str, turn_id: str) -> None:
        """Note the claimed row's turn id once its turn has started (while `running`), so
        that another process can find what the turn stored if this one dies."""
        ...

    async def get(self, owner: str, key: str) -> IdempotencyRecord | None: ...

    async def finish(self, owner: str, key: str, result: dict[str, Any]) -> None:
        """Keep the outcome of the claimed turn: the row becomes `done`."""
        ...

    async def release(self, owner: str, key: str) -> None:
        """Drop a claim whose turn stored nothing, so a retry runs for real."""
        ...

    async def prune(self, before: datetime) -> int:
        """Remove the rows made before `before` (past the retention); how many went."""
        ...
