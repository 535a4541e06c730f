"""The note store port: a user's notes, their chunks, a keyword index over the chunks and
the chunks' embedding vectors.

Every method takes the owner and answers only from the owner's rows: another user's note
is invisible, exactly like an id that never existed. Vectors are float32, one row per
chunk, recorded with the name of the embedder that made them, so a gateway that changes
its embedding model never compares vectors of two models.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

from sessiongate.core.notes import Note, Vectors
from sessiongate.errors import Conflict
from sessiongate.store.base import Row

ChunkIds = npt.NDArray[np.int64]


class NoteLimitReached(Conflict):
    """The owner already keeps `[notes] max_notes_per_user` notes (raised by `add_note`)."""

    code = "note_limit_reached"

    def __init__(self, limit: int) -> None:
        super().__init__(
            f"you have {limit} notes, the most one user may keep here; delete some"
            " (DELETE /v1/notes/{id}) or ask the operator to raise [notes] max_notes_per_user"
        )


@dataclass(frozen=True, slots=True)
class NoteChunk:
    """One chunk of a note, as a search returns it."""

    chunk_id: int
    note_id: str
    seq: int
    title: str | None
    source: str | None
    content: str


@dataclass(frozen=True, slots=True)
class ChunkVectors:
    """An owner's chunk vectors of one embedder: `ids[i]` is the chunk of `matrix[i]`."""

    ids: ChunkIds
    matrix: Vectors


def vector_bytes(vector: Vectors) -> bytes:
    """One vector as stored: little-endian float32."""
    return np.ascontiguousarray(vector, dtype="<f4").tobytes()


#: The note columns both stores write and select, in the order `note_from_row` reads.
NOTE_COLUMNS = "id, owner, title, source, content, created_at"


def note_from_row(row: Row, to_time: Callable[[Any], datetime]) -> Note:
    """A row of `NOTE_COLUMNS`; `to_time` reads the store's stored time."""
    return Note(
        note_id=row[0],
        owner=row[1],
        title=row[2],
        source=row[3],
        content=row[4],
        created_at=to_time(row[5]),
    )


def vectors_from(blobs: Sequence[bytes], dimensions: int) -> Vectors:
    """Stored vectors back as an (n, dimensions) float32 matrix."""
    if not blobs:
        return np.zeros((0, dimensions), dtype=np.float32)
    flat = np.frombuffer(b"".join(blobs), dtype="<f4")
    return flat.reshape(len(blobs), dimensions).astype(np.float32, copy=False)


class NoteStore(Protocol):
    async def add_note(
        self,
        note: Note,
        chunks: Sequence[str],
        vectors: Vectors | None,
        embedder: str | None,
        *,
        replace_source: bool = False,
        max_notes: int | None = None,
    ) -> int:
        """Keep the note and its chunks (with `vectors[i]` for `chunks[i]` when given), in
        one transaction. `replace_source`: first remove the owner's notes with the same
        source (an import of a file it has seen before); returns how many went.
        `max_notes`: raise NoteLimitReached, writing nothing, when the owner would keep
        more notes than that; counted in the same transaction, with concurrent adds of
        the owner serialised, so they never pass it."""
        ...

    async def list_notes(self, owner: str, limit: int, before: str | None) -> list[Note]:
        """The owner's notes, newest first; `before`: only notes older than that id."""
        ...

    async def delete_note(self, owner: str, note_id: str) -> bool:
        """False when the owner has no such note (unknown, or someone else's)."""
        ...

    async def keyword_chunks(self, owner: str, words: Sequence[str], limit: int) -> list[int]:
        """Chunk ids holding any of `words`, best match first."""
        ...

    async def notes_version(self, owner: str) -> int:
        """A number that changes whenever the owner's notes change (in any process), so a
        cache of them can tell it is stale."""
        ...

    async def chunk_vectors(self, owner: str, embedder: str, dimensions: int) -> ChunkVectors:
        """Every vector `embedder` made for the owner's chunks, in chunk-id order."""
        ...

    async def chunks(self, owner: str, chunk_ids: Sequence[int]) -> list[NoteChunk]:
        """The owner's chunks among `chunk_ids` (in no order); others are left out."""
        ...

    async def aclose(self) -> None:
        """Release what the store holds beside the shared connection or pool."""
        ...
