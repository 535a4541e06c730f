"""The artifact store port: the rows that say whose a tool-made file is.

The bytes are not here (store/artifact_files.py keeps them under data_dir/artifacts);
a row names its file, so the layout on disk can change without touching old rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.store.base import Row

#: The columns both stores write and select, in the order `artifact_from_row` reads.
ARTIFACT_COLUMNS = "id, owner, key, turn_id, media_type, size, sha256, created_at, file_name"


def artifact_from_row(row: Row, to_time: Callable[[Any], datetime]) -> Artifact:
    """A row of `ARTIFACT_COLUMNS`; `to_time` reads the store's stored time."""
    return Artifact(
        artifact_id=row[0],
        owner=row[1],
        key=row[2],
        turn_id=row[3],
        media_type=row[4],
        size=int(row[5]),
        sha256=row[6],
        created_at=to_time(row[7]),
        file_name=row[8],
    )


class ArtifactStore(Protocol):
    async def add_artifact(self, artifact: Artifact, copy: ArtifactCopy | None = None) -> None:
        """The row, and in the same transaction its WebDAV copy's (when copies are on)."""
        ...

    async def get_artifact(self, owner: str, artifact_id: str) -> Artifact | None:
        """The owner's artifact; None for an unknown id and for another user's alike."""
        ...

    async def artifacts_of_key(self, owner: str, key: str) -> list[Artifact]: ...

    async def list_artifacts(
        self, owner: str, key: str, *, turn_id: str | None, media_type: str | None, limit: int
    ) -> list[Artifact]:
        """The key's artifacts, optionally one turn's or one media type's, newest first,
        at most `limit`: filtered and cut by the database, on its (owner, key) index."""
        ...

    async def artifacts_of_owner(self, owner: str) -> list[Artifact]: ...

    async def delete_artifacts(
        self, owner: str, artifact_ids: list[str], *, delete_copies: bool = True
    ) -> None:
        """Remove the rows; in the same transaction their WebDAV copies' rows become
        `deleting` (the remote files' deletion, queued), or go (`delete_copies=False`:
        the remote files stay)."""
        ...
