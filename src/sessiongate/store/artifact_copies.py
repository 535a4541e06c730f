"""The artifact copy queue's port: one row per artifact copied (or to be copied) to the
WebDAV folder, and per copy still to delete there after its artifact was erased
(service/artifact_copy.py runs the queue; the migration `artifact_copies` says what each
state means).

A row is written with its artifact, in the same transaction (`ArtifactStore.add_artifact`),
and turned into `deleting` in the transaction that erases the artifact
(`ArtifactStore.delete_artifacts`), so a crash never leaves an artifact without its copy
row, nor an erased artifact whose copy nobody will delete.

A sender claims one due row at a time: the claim counts the attempt and moves
`next_attempt_at` past it (a lease), so another process, or this one after a crash, takes
the row again only once the lease ran out. The sender's verdict is written only if the row
is still as it claimed it (same state, same attempts): an erasure during an upload turns
the row into `deleting` with no attempts, the upload's `copied` then changes nothing, and
the deletion runs once the upload is over (the sender ends its lease, or the lease ends).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, cast

from sessiongate.core.artifacts import ArtifactCopy, CopyState
from sessiongate.store.base import Row

#: The columns both stores write and select, in the order `copy_from_row` reads.
COPY_COLUMNS = (
    "artifact_id, owner, remote_path, state, attempts, next_attempt_at, last_error, updated_at"
)


def copy_from_row(row: Row, to_time: Callable[[Any], datetime]) -> ArtifactCopy:
    """A row of `COPY_COLUMNS`; `to_time` reads the store's stored time."""
    return ArtifactCopy(
        artifact_id=row[0],
        owner=row[1],
        remote_path=row[2],
        state=cast(CopyState, row[3]),
        attempts=int(row[4]),
        next_attempt_at=to_time(row[5]),
        last_error=row[6],
        updated_at=to_time(row[7]),
    )


def copy_row(copy: ArtifactCopy, from_time: Callable[[datetime], Any]) -> tuple[Any, ...]:
    """The row an insert writes; `from_time` writes a time as the store keeps it."""
    return (
        copy.artifact_id,
        copy.owner,
        copy.remote_path,
        copy.state,
        copy.attempts,
        from_time(copy.next_attempt_at),
        copy.last_error,
        from_time(copy.updated_at),
    )


@dataclass(frozen=True, slots=True)
class CopyJob:
    """A claimed row (its `attempts` already counts this attempt) and, for a copy, the
    artifact's file (relative to data_dir/artifacts) and media type; both None once the
    artifact is gone."""

    copy: ArtifactCopy
    file_name: str | None
    media_type: str | None


class ArtifactCopyStore(Protocol):
    async def get_copy(self, owner: str, artifact_id: str) -> ArtifactCopy | None:
        """The owner's copy row; None for another user's artifact and for none."""
        ...

    async def claim_due(self, now: datetime, lease_until: datetime) -> CopyJob | None:
        """The oldest due `pending` or `deleting` row, claimed until `lease_until`."""
        ...

    async def next_due(self) -> datetime | None:
        """When the earliest `pending` or `deleting` row is due; None for none."""
        ...

    async def settle(
        self,
        claimed: ArtifactCopy,
        state: CopyState,
        *,
        now: datetime,
        next_attempt_at: datetime | None = None,
        last_error: str | None = None,
    ) -> bool:
        """Record an attempt's outcome, if the row is still as claimed; whether it was.
        Without `next_attempt_at` the row is due now (a finished copy is due for its
        deletion as soon as it is erased)."""
        ...

    async def forget(self, claimed: ArtifactCopy) -> bool:
        """Remove a row (its remote file is deleted), if it is still as claimed."""
        ...

    async def release(self, claimed: ArtifactCopy, now: datetime) -> None:
        """Give a claimed row back uncounted and due now (the sender is stopping)."""
        ...

    async def end_lease(self, claimed: ArtifactCopy, now: datetime) -> None:
        """The row changed during an attempt (an erasure): make it due now if it still
        waits for this claim's lease, so the deletion need not wait for the lease."""
        ...

    async def retry_failed(self, now: datetime) -> int:
        """Every `failed` copy back to `pending` with no attempts, due now; how many."""
        ...
