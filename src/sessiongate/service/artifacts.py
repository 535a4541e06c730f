"""Artifacts: files tools make (images now; audio and attachments later), kept for their
owner and served at `GET /v1/artifacts/{id}` (DESIGN.md §9).

An artifact belongs to one user. Reading another user's artifact answers exactly as an
unknown id does (`artifact_not_found`), so nobody learns that it exists. An artifact made
in a conversation names its key, and goes when that key is erased.

The bytes live under `data_dir/artifacts`, or with `[artifacts] store = "database"` in
the database, where every gateway reads them (store/artifact_bytes.py); either way they
are written and read a chunk at a time (`save_stream`, `open`), never whole.

Bytes are written before the row: a crash between the two leaves unreferenced bytes,
never a row whose bytes are missing. Erasure removes the rows first for the same reason.

With `[artifacts] webdav_url` set, every saved artifact is also copied to that WebDAV
folder in the background, and an erased one's copy is deleted there
(service/artifact_copy.py).
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path

from sessiongate.config import Settings
from sessiongate.core.artifacts import Artifact, ArtifactCopy
from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator, is_session_id
from sessiongate.core.keys import KeyRef, validate_session_key
from sessiongate.errors import ContentTooLarge, InvalidInput, NotFound
from sessiongate.service.artifact_copy import ArtifactCopier
from sessiongate.store.artifact_bytes import ArtifactBytes, ChunkStore
from sessiongate.store.artifact_copies import ArtifactCopyStore
from sessiongate.store.artifact_files import ArtifactFiles
from sessiongate.store.artifacts import ArtifactStore
from sessiongate.store.base import Store

#: `type/subtype`, lower case, without parameters (RFC 6838's restricted-name characters).
_MEDIA_TYPE = re.compile(r"[a-z0-9][a-z0-9!#$&^_.+-]{0,63}/[a-z0-9][a-z0-9!#$&^_.+-]{0,63}")


class ArtifactNotFound(NotFound):
    """Unknown id, or another user's artifact (never say which)."""

    code = "artifact_not_found"


class InvalidArtifactId(InvalidInput):
    code = "invalid_artifact_id"


class ArtifactTooLarge(ContentTooLarge):
    code = "artifact_too_large"


class ArtifactService:
    def __init__(
        self,
        store: ArtifactStore,
        files: ArtifactBytes,
        ids: IdGenerator,
        clock: Clock,
        *,
        max_bytes: int,
        copies: ArtifactCopier | None = None,
    ) -> None:
        self.store = store
        self.files = files
        self.ids = ids
        self.clock = clock
        self.max_bytes = max_bytes
        #: The WebDAV copies (None: an artifact service without them).
        self.copies = copies

    async def save(
        self,
        owner: str,
        data: bytes,
        media_type: str,
        *,
        key: str | None = None,
        turn_id: str | None = None,
    ) -> Artifact:
        """Keep `data` (already in memory: a tool's output, an attachment)."""
        if not data:
            raise InvalidInput("an artifact needs at least one byte", code="empty_artifact")
        if len(data) > self.max_bytes:
            raise ArtifactTooLarge(
                f"the artifact is {len(data)} bytes; limits.max_artifact_bytes is {self.max_bytes}"
            )

        async def pieces() -> AsyncIterator[bytes]:
            yield data

        return await self.save_stream(owner, pieces(), media_type, key=key, turn_id=turn_id)

    async def save_stream(
        self,
        owner: str,
        pieces: AsyncIterable[bytes],
        media_type: str,
        *,
        key: str | None = None,
        turn_id: str | None = None,
    ) -> Artifact:
        """Keep the bytes `pieces` yields, written as they come (an upload): past
        `limits.max_artifact_bytes`, ArtifactTooLarge and nothing kept."""
        if not _MEDIA_TYPE.fullmatch(media_type):
            raise InvalidInput(f"{media_type!r} is not a media type", code="invalid_media_type")
        if key is not None:
            validate_session_key(key)
        artifact_id = self.ids.new()
        file_name = self.files.file_name(owner, artifact_id)
        size, sha256 = await self.files.write(file_name, owner, self._bounded(pieces))
        if size == 0:
            await self.files.remove([file_name])
            raise InvalidInput("an artifact needs at least one byte", code="empty_artifact")
        artifact = Artifact(
            artifact_id=artifact_id,
            owner=owner,
            key=key,
            turn_id=turn_id,
            media_type=media_type,
            size=size,
            sha256=sha256,
            created_at=self.clock.now(),
            file_name=file_name,
        )
        copy = None if self.copies is None else self.copies.plan(artifact)
        try:
            await self.store.add_artifact(artifact, copy)
        except BaseException:
            await self.files.remove([artifact.file_name])
            raise
        if copy is not None and self.copies is not None:
            self.copies.wake()  # copied in the background: the caller never waits for it
        return artifact

    async def _bounded(self, pieces: AsyncIterable[bytes]) -> AsyncIterator[bytes]:
        size = 0
        async for piece in pieces:
            size += len(piece)
            if size > self.max_bytes:
                raise ArtifactTooLarge(
                    f"the artifact is over limits.max_artifact_bytes ({self.max_bytes} bytes)"
                )
            if piece:
                yield piece

    async def describe(self, owner: str, artifact_id: str) -> Artifact:
        """The owner's artifact row; ArtifactNotFound for an unknown id or someone else's."""
        if not is_session_id(artifact_id):
            raise InvalidArtifactId("an artifact id is a lower-case UUID as the gateway issues it")
        artifact = await self.store.get_artifact(owner, artifact_id)
        if artifact is None:
            raise ArtifactNotFound(f"no artifact {artifact_id}")
        return artifact

    async def of_key(
        self,
        owner: str,
        key: str,
        *,
        turn_id: str | None = None,
        media_type: str | None = None,
        limit: int = 100,
    ) -> list[Artifact]:
        """The owner's artifacts made on `key` (optionally by one turn, of one media type),
        newest first, at most `limit`. Another user's key lists nothing."""
        return await self.store.list_artifacts(
            owner, key, turn_id=turn_id, media_type=media_type, limit=limit
        )

    async def read(self, owner: str, artifact_id: str) -> tuple[Artifact, bytes]:
        """The artifact and its whole bytes (small ones; `open` streams)."""
        artifact = await self.describe(owner, artifact_id)
        data = await self.files.read(artifact.file_name)
        if data is None:  # erased between the row and the bytes
            raise ArtifactNotFound(f"no artifact {artifact_id}")
        return artifact, data

    async def open(self, owner: str, artifact_id: str) -> tuple[Artifact, AsyncIterator[bytes]]:
        """The artifact and its bytes, a chunk at a time (a download)."""
        artifact = await self.describe(owner, artifact_id)
        pieces = await self.files.open(artifact.file_name)
        if pieces is None:  # erased between the row and the bytes
            raise ArtifactNotFound(f"no artifact {artifact_id}")
        return artifact, pieces

    async def copy_of(self, artifact: Artifact) -> ArtifactCopy | None:
        """A described artifact's WebDAV copy; None when it has none."""
        if self.copies is None:
            return None
        return await self.copies.status(artifact.owner, artifact.artifact_id)

    async def delete_key(self, ref: KeyRef) -> int:
        """Remove every artifact the key made (rows, then files; their WebDAV copies are
        deleted in the background); how many went."""
        return await self._erase(ref.owner, await self.store.artifacts_of_key(ref.owner, ref.name))

    async def erase_user(self, owner: str) -> int:
        """Remove every artifact of a user being erased, as `delete_key` does."""
        return await self._erase(owner, await self.store.artifacts_of_owner(owner))

    async def _erase(self, owner: str, found: list[Artifact]) -> int:
        if not found:
            return 0
        delete_copies = self.copies is None or self.copies.config.delete_remote
        await self.store.delete_artifacts(
            owner, [a.artifact_id for a in found], delete_copies=delete_copies
        )
        if self.copies is not None:
            self.copies.wake()
        await self.files.remove([a.file_name for a in found])
        return len(found)


def artifacts_folder(settings: Settings) -> Path:
    return settings.data_dir / "artifacts"


def build_artifact_service(
    settings: Settings, store: Store, clock: Clock, ids: IdGenerator
) -> ArtifactService:
    """The artifact rows beside the session store's (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: ArtifactStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.artifacts import SQLiteArtifactStore

        rows = SQLiteArtifactStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.artifacts import PostgresArtifactStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no artifact store for {type(store).__name__}")
        rows = PostgresArtifactStore(store)
    files = ArtifactBytes(
        ArtifactFiles(artifacts_folder(settings)),
        chunk_rows(store),
        database=settings.artifacts.store == "database",
    )
    return ArtifactService(
        rows,
        files,
        ids,
        clock,
        max_bytes=settings.limits.max_artifact_bytes,
        copies=ArtifactCopier(settings.artifacts, copy_rows(store), files, clock),
    )


def chunk_rows(store: Store) -> ChunkStore:
    """The artifact chunk rows beside the artifact rows."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.artifact_chunks import SQLiteArtifactChunks

        return SQLiteArtifactChunks(store)
    from sessiongate.store.postgres.artifact_chunks import PostgresArtifactChunks
    from sessiongate.store.postgres.store import PostgresStore

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no artifact chunk store for {type(store).__name__}")
    return PostgresArtifactChunks(store)


def copy_rows(store: Store) -> ArtifactCopyStore:
    """The copy queue beside the artifact rows."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.artifact_copies import SQLiteArtifactCopyStore

        return SQLiteArtifactCopyStore(store)
    from sessiongate.store.postgres.artifact_copies import PostgresArtifactCopyStore
    from sessiongate.store.postgres.store import PostgresStore

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no artifact copy store for {type(store).__name__}")
    return PostgresArtifactCopyStore(store)
