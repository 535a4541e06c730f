"""Artifacts as every layer sees them: a kept file (an image a turn generated, a spoken
reply) and the state of its copy on a WebDAV server. The records only; the stores keep
them (store/artifacts.py, store/artifact_copies.py), services decide about them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal


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


CopyState = Literal["pending", "copied", "failed", "deleting"]


@dataclass(frozen=True, slots=True)
class ArtifactCopy:
    artifact_id: str
    owner: str
    #: Under the WebDAV folder, `/` between folders, names not percent-encoded.
    remote_path: str
    state: CopyState
    attempts: int
    next_attempt_at: datetime
    #: Why the last attempt failed (a fixed text, never the server's body); None after a
    #: success and before the first attempt.
    last_error: str | None
    updated_at: datetime
