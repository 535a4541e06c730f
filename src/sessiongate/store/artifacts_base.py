"""The artifact store port: the rows that say whose a tool-made file is.

The bytes are not here (store/artifact_files.py keeps them under data_dir/artifacts);
a row names its file, so the layout on disk can change without touching old rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Artifact:
    artifact_id: str
    owner: str
    #: The key's name in the owner's namespace, or None for a file no conversation made.
    key: str | None
    turn_id: str | None
    media_type: str
    size: int
    sha256: str
    created_at: datetime
    #: The file's path relative to data_dir/artifacts.
    file_name: str


class ArtifactStore(Protocol):
    async def add_artifact(self, artifact: Artifact) -> None: ...

    async def get_artifact(self, owner: str, artifact_id: str) -> Artifact | None:
        """The owner's artifact; None for an unknown id and for another user's alike."""
        ...

    async def artifacts_of_key(self, owner: str, key: str) -> list[Artifact]: ...

    async def delete_artifacts(self, owner: str, artifact_ids: list[str]) -> None: ...
