"""Where artifact bytes live: files under `data_dir/artifacts` (store/artifact_files.py)
or chunks in the database (`[artifacts] store = "database"`: the `artifact_chunks` rows
of the store's dialect), read and written a piece at a time, never whole.

A row's `file_name` says which: `db:<artifact id>` for chunks in the database, a path
under the folder otherwise. New artifacts go where `[artifacts] store` says; ones kept
before a change of store are still read (and erased) where their row says they are.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterable, AsyncIterator
from pathlib import Path
from typing import BinaryIO, Protocol

from sessiongate.store.artifact_files import ArtifactFiles

#: The most bytes one chunk row holds, and one read of a file.
CHUNK_BYTES = 256 * 1024
#: A `file_name` naming chunks in the database.
DATABASE_PREFIX = "db:"


class ChunkStore(Protocol):
    """The `artifact_chunks` rows (store/sqlite/artifact_chunks.py,
    store/postgres/artifact_chunks.py)."""

    async def put_chunk(self, artifact_id: str, seq: int, owner: str, data: bytes) -> None: ...

    async def get_chunk(self, artifact_id: str, seq: int) -> bytes | None:
        """One chunk; None past the last one (or for an artifact with none)."""
        ...

    async def delete_chunks(self, artifact_ids: list[str]) -> int:
        """Remove every chunk of these artifacts; how many rows went."""
        ...


class ArtifactBytes:
    def __init__(self, files: ArtifactFiles, chunks: ChunkStore | None, *, database: bool) -> None:
        if database and chunks is None:
            raise ValueError("the database artifact store needs the chunk rows")
        self.files = files
        self.chunks = chunks
        #: New artifacts' bytes go to the database (else to files).
        self.database = database

    @property
    def root(self) -> Path:
        """The folder of the artifacts kept as files."""
        return self.files.root

    def file_name(self, owner: str, artifact_id: str) -> str:
        """Where a new artifact's bytes go (what its row records)."""
        if self.database:
            return DATABASE_PREFIX + artifact_id
        return self.files.file_name(owner, artifact_id)

    async def write(
        self, file_name: str, owner: str, pieces: AsyncIterable[bytes]
    ) -> tuple[int, str]:
        """Write the pieces as they come (a failure, or an exception from `pieces`, leaves
        nothing behind); their total size and SHA-256."""
        digest = hashlib.sha256()
        size = 0
        chunk_id = _chunk_id(file_name)
        if chunk_id is not None:
            chunks = self._chunk_rows()
            seq = 0
            buffer = bytearray()
            try:
                async for piece in pieces:
                    digest.update(piece)
                    size += len(piece)
                    buffer += piece
                    while len(buffer) >= CHUNK_BYTES:
                        await chunks.put_chunk(chunk_id, seq, owner, bytes(buffer[:CHUNK_BYTES]))
                        del buffer[:CHUNK_BYTES]
                        seq += 1
                if buffer:
                    await chunks.put_chunk(chunk_id, seq, owner, bytes(buffer))
            except BaseException:
                await asyncio.shield(chunks.delete_chunks([chunk_id]))
                raise
            return size, digest.hexdigest()
        fd, temporary = await asyncio.to_thread(self.files.begin, file_name)
        try:
            async for piece in pieces:
                digest.update(piece)
                size += len(piece)
                await asyncio.to_thread(self.files.append, fd, piece)
        except BaseException:
            await asyncio.to_thread(self.files.abort, fd, temporary)
            raise
        await asyncio.to_thread(self.files.commit, fd, temporary, file_name)
        return size, digest.hexdigest()

    async def open(self, file_name: str) -> AsyncIterator[bytes] | None:
        """The bytes, a chunk at a time; None when they are gone (erased while the row
        was read). The first chunk is read here, so a missing artifact is known before
        an answer starts."""
        chunk_id = _chunk_id(file_name)
        if chunk_id is not None:
            chunks = self._chunk_rows()
            first = await chunks.get_chunk(chunk_id, 0)
            if first is None:
                return None
            return _database_chunks(chunks, chunk_id, first)
        handle = await asyncio.to_thread(self.files.open, file_name)
        if handle is None:
            return None
        return _file_chunks(handle)

    async def read(self, file_name: str) -> bytes | None:
        """The whole bytes (small artifacts, the WebDAV copy); None when gone."""
        pieces = await self.open(file_name)
        if pieces is None:
            return None
        return b"".join([piece async for piece in pieces])

    async def remove(self, file_names: list[str]) -> None:
        in_database = [c for c in map(_chunk_id, file_names) if c is not None]
        if in_database:
            await self._chunk_rows().delete_chunks(in_database)
        on_disk = [f for f in file_names if _chunk_id(f) is None]
        if on_disk:
            await asyncio.to_thread(self._remove_files, on_disk)

    def _remove_files(self, file_names: list[str]) -> None:
        for file_name in file_names:
            self.files.remove(file_name)

    def _chunk_rows(self) -> ChunkStore:
        if self.chunks is None:
            raise ValueError("artifact bytes in the database, but no chunk rows here")
        return self.chunks


def _chunk_id(file_name: str) -> str | None:
    return file_name[len(DATABASE_PREFIX) :] if file_name.startswith(DATABASE_PREFIX) else None


async def _database_chunks(
    chunks: ChunkStore, artifact_id: str, first: bytes
) -> AsyncIterator[bytes]:
    yield first
    seq = 1
    while (chunk := await chunks.get_chunk(artifact_id, seq)) is not None:
        yield chunk
        seq += 1


async def _file_chunks(handle: BinaryIO) -> AsyncIterator[bytes]:
    try:
        while chunk := await asyncio.to_thread(handle.read, CHUNK_BYTES):
            yield chunk
    finally:
        handle.close()
