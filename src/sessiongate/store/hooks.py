"""The hook delivery store port: the persisted queue of webhook deliveries (docs/hooks.md).

A delivery is `pending` until it is `delivered` or, after its hook's `max_attempts`,
`failed`; finished ones are kept (up to the hook's `queue_size`) for inspection. A sender
*claims* due deliveries: one statement counts the attempt and moves `next_attempt_at` past
the attempt's longest run (a lease), so another worker process does not take the same row,
and a process that dies mid-send leaves a row that becomes due again when the lease ends.
Every later change names the attempt it reports (`attempts`), so a stale sender whose
lease ran out changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from sessiongate.core.hooks import DeliveryStatus
from sessiongate.store.base import Row


@dataclass(frozen=True, slots=True)
class HookDelivery:
    delivery_id: str
    hook: str
    event: str
    #: The JSON body exactly as it is sent (and signed).
    body: str
    status: DeliveryStatus
    #: Attempts made (or under way) so far.
    attempts: int
    #: When the next attempt is due (pending), or until when a claimed attempt holds it.
    next_attempt_at: datetime
    last_error: str | None
    delivered_at: datetime | None
    failed_at: datetime | None
    created_at: datetime
    #: The user and the key the event is about (None: not about a key). Erasing the key
    #: erases its deliveries.
    owner: str | None
    session_key: str | None


#: The columns both stores write and select, in the order `delivery_from_row` reads.
DELIVERY_COLUMNS = (
    "id, hook, event, body, status, attempts, next_attempt_at, last_error,"
    " delivered_at, failed_at, created_at, owner, session_key"
)


def delivery_from_row(row: Row, to_time: Callable[[Any], datetime]) -> HookDelivery:
    """A row of `DELIVERY_COLUMNS`; `to_time` reads the store's stored time."""
    return HookDelivery(
        delivery_id=row[0],
        hook=row[1],
        event=row[2],
        body=row[3],
        status=row[4],
        attempts=row[5],
        next_attempt_at=to_time(row[6]),
        last_error=row[7],
        delivered_at=None if row[8] is None else to_time(row[8]),
        failed_at=None if row[9] is None else to_time(row[9]),
        created_at=to_time(row[10]),
        owner=row[11],
        session_key=row[12],
    )


class HookStore(Protocol):
    async def enqueue(
        self, deliveries: Sequence[HookDelivery], queue_sizes: Mapping[str, int]
    ) -> dict[str, int]:
        """Insert new pending deliveries in one transaction, then drop each named hook's
        oldest pending ones beyond its queue size; how many were dropped, per hook."""
        ...

    async def claim_due(
        self, now: datetime, lease_until: datetime, limit: int
    ) -> list[HookDelivery]:
        """Up to `limit` pending deliveries due at `now`, oldest due first, each with one
        more attempt counted and `next_attempt_at = lease_until`; rows another process is
        claiming at the same moment are skipped."""
        ...

    async def next_due(self) -> datetime | None:
        """The earliest `next_attempt_at` of any pending delivery."""
        ...

    async def mark_delivered(self, delivery_id: str, attempts: int, now: datetime) -> bool:
        """The attempt `attempts` succeeded; False when the row moved on without it."""
        ...

    async def mark_retry(
        self, delivery_id: str, attempts: int, next_attempt_at: datetime, error: str
    ) -> bool: ...

    async def mark_failed(
        self, delivery_id: str, attempts: int, now: datetime, error: str
    ) -> bool: ...

    async def release(self, claimed: Sequence[HookDelivery], now: datetime) -> None:
        """Give back claimed deliveries whose attempt never ran to its end (shutdown): the
        attempt is not counted and they are due at once."""
        ...

    async def prune_finished(self, hook: str, keep: int) -> int:
        """Delete the hook's delivered and failed deliveries but the newest `keep`."""
        ...

    async def list_deliveries(
        self, hook: str | None, status: DeliveryStatus | None, limit: int
    ) -> list[HookDelivery]:
        """Newest first."""
        ...

    async def counts(self) -> dict[str, dict[str, int]]:
        """Deliveries per hook and status."""
        ...

    async def delete_for_key(self, owner: str, session_key: str) -> int:
        """Delete every delivery about a key being erased; how many went."""
        ...


def delivery_row(d: HookDelivery, from_time: Callable[[datetime], Any]) -> tuple[Any, ...]:
    """The row an insert writes (`DELIVERY_COLUMNS`' order); `from_time` writes a time as
    the store keeps it."""
    return (
        d.delivery_id,
        d.hook,
        d.event,
        d.body,
        d.status,
        d.attempts,
        from_time(d.next_attempt_at),
        d.last_error,
        None if d.delivered_at is None else from_time(d.delivered_at),
        None if d.failed_at is None else from_time(d.failed_at),
        from_time(d.created_at),
        d.owner,
        d.session_key,
    )
