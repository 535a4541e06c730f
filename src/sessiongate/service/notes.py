"""Notes: a user's own texts, searched by the `notes_search` tool and `GET /v1/notes`
(DESIGN.md §7, seed 002's notes folder).

A note is cut into chunks on paragraphs (core/notes.py); a search ranks chunks. Keyword
ranking (the store's full-text index) always runs; when `[notes] embeddings` is set, the
query is embedded too, the owner's chunk vectors are ranked by cosine similarity, and the
two rankings are fused by reciprocal rank fusion (k = 60, `core.notes.RRF_K`). Scores are
the fused ones, higher is better, identical on both stores.

A note belongs to one user. Another user's note answers exactly as an unknown id does
(`note_not_found`), so nobody learns that it exists.

The owner's vector matrix is cached in memory (a search otherwise re-reads and decodes
every vector: tens of milliseconds at 10,000 notes). The store keeps a version number per
owner, bumped in the transaction of every write; the cache is trusted only while the
version read before the search still matches, so a note added by another gateway process
is seen at once. The version is read before the vectors, never after: a write landing
between the two leaves a cache newer than its version, which the next search reloads.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from sessiongate.config import Settings
from sessiongate.config.tools import NotesConfig
from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.notes import (
    MAX_LIMIT,
    MAX_PAGE,
    Note,
    Vectors,
    chunk_text,
    search_words,
    validate_limit,
    validate_note_content,
    validate_note_id,
    validate_query,
    validate_source,
    validate_title,
)
from sessiongate.errors import InvalidInput, NotFound
from sessiongate.models.embeddings import Embedder, build_embedder
from sessiongate.service.hybrid_search import fused_ranking
from sessiongate.store.base import Store
from sessiongate.store.notes import ChunkVectors, NoteStore

log = logging.getLogger("sessiongate.notes")

#: Each ranking contributes its best this-many chunks to the fusion. Deeper lists change
#: the fused top 5 very rarely and cost the full-text index a longer sort.
CANDIDATES = 50
#: Owners whose vector matrices stay in memory (least recently searched go first).
CACHED_OWNERS = 32
#: Notes a listing page holds unless the caller asks for another number.
DEFAULT_PAGE = 20


class NoteNotFound(NotFound):
    """Unknown id, or another user's note (never say which)."""

    code = "note_not_found"


@dataclass(frozen=True, slots=True)
class NoteHit:
    """One ranked chunk of a note."""

    note_id: str
    title: str | None
    source: str | None
    content: str
    score: float
    chunk_id: int
    seq: int


@dataclass(frozen=True, slots=True)
class SearchResult:
    hits: list[NoteHit]
    #: Whether semantic ranking took part (embeddings configured and answering).
    semantic: bool


@dataclass(frozen=True, slots=True)
class _CachedVectors:
    version: int
    embedder: str
    vectors: ChunkVectors


class NoteService:
    def __init__(
        self,
        store: NoteStore,
        embedder: Embedder | None,
        ids: IdGenerator,
        clock: Clock,
        config: NotesConfig,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.ids = ids
        self.clock = clock
        self.config = config
        self._cache: OrderedDict[str, _CachedVectors] = OrderedDict()

    async def start(self) -> None:
        if self.embedder is not None:
            await self.embedder.start()

    async def aclose(self) -> None:
        await self.store.aclose()
        if self.embedder is not None:
            await self.embedder.aclose()

    # -- writes -----------------------------------------------------------------------

    async def add(
        self, owner: str, content: object, *, title: object = None, source: object = None
    ) -> Note:
        """Keep a new note."""
        note, _ = await self._keep(owner, content, title, source, replace_source=False)
        return note

    async def import_note(
        self, owner: str, content: object, *, title: object, source: str
    ) -> tuple[Note, int]:
        """Keep a note as the only one of its source: the owner's notes with the same
        source go in the same transaction (an import of a file seen before replaces its
        note). Returns the note and how many notes it replaced."""
        return await self._keep(owner, content, title, source, replace_source=True)

    async def _keep(
        self,
        owner: str,
        content: object,
        title: object,
        source: object,
        *,
        replace_source: bool,
    ) -> tuple[Note, int]:
        text = validate_note_content(content, self.config.max_note_chars)
        note = Note(
            note_id=self.ids.new(),
            owner=owner,
            title=validate_title(title),
            source=validate_source(source),
            content=text,
            created_at=self.clock.now(),
        )
        if replace_source and note.source is None:
            raise InvalidInput("an imported note needs its source", code="invalid_source")
        chunks = chunk_text(text, self.config.chunk_chars)
        vectors: Vectors | None = None
        embedder_name = None
        if self.embedder is not None:
            # The title says what the note is about: each chunk is embedded under it.
            prefix = f"{note.title}\n" if note.title else ""
            vectors = await self.embedder.embed([prefix + chunk for chunk in chunks])
            embedder_name = self.embedder.name
        replaced = await self.store.add_note(
            note,
            chunks,
            vectors,
            embedder_name,
            replace_source=replace_source,
            max_notes=self.config.max_notes_per_user,
        )
        self._cache.pop(owner, None)
        return note, replaced

    async def delete(self, owner: str, note_id: object) -> None:
        checked = validate_note_id(note_id)
        if not await self.store.delete_note(owner, checked):
            raise NoteNotFound(f"no note {checked}")
        self._cache.pop(owner, None)

    def forget_owner(self, owner: str) -> None:
        """The owner was erased (service/user_erasure.py): drop their cached vectors."""
        self._cache.pop(owner, None)

    # -- reads ------------------------------------------------------------------------

    async def list_notes(
        self, owner: str, *, limit: object = None, before: object = None
    ) -> list[Note]:
        """The owner's notes, newest first, a page at a time: `before` is the id of the last
        note of the previous page."""
        page = validate_limit(DEFAULT_PAGE if limit is None else limit, MAX_PAGE)
        after = None if before is None else validate_note_id(before)
        return await self.store.list_notes(owner, page, after)

    async def search(
        self,
        owner: str,
        query: object,
        limit: object = None,
        *,
        keyword: bool = True,
        semantic: bool = True,
    ) -> SearchResult:
        """The owner's chunks that best match `query`, best first (at most `limit`, by
        default `[notes] top_k`). `keyword`/`semantic` leave a ranking out (the benchmark
        times each alone); semantic ranking needs `[notes] embeddings`."""
        text = validate_query(query)
        wanted = validate_limit(self.config.top_k if limit is None else limit, MAX_LIMIT)
        depth = max(CANDIDATES, wanted)
        words = search_words(text) if keyword else []
        fused_ranking_ = await fused_ranking(
            text,
            self.store.keyword_chunks(owner, words, depth) if keyword else None,
            self.embedder if semantic else None,
            lambda embedder: self._vectors(owner, embedder),
            depth,
            what="notes",
        )
        fused = fused_ranking_.ranked[:wanted]
        found = {c.chunk_id: c for c in await self.store.chunks(owner, [i for i, _ in fused])}
        hits = [
            NoteHit(
                note_id=chunk.note_id,
                title=chunk.title,
                source=chunk.source,
                content=chunk.content,
                score=round(score, 6),
                chunk_id=chunk.chunk_id,
                seq=chunk.seq,
            )
            for chunk_id, score in fused
            if (chunk := found.get(chunk_id)) is not None  # deleted meanwhile: left out
        ]
        return SearchResult(hits, fused_ranking_.semantic)

    async def _vectors(self, owner: str, embedder: Embedder) -> ChunkVectors:
        version = await self.store.notes_version(owner)  # before the vectors: see above
        cached = self._cache.get(owner)
        if cached is not None and cached.version == version and cached.embedder == embedder.name:
            self._cache.move_to_end(owner)
            return cached.vectors
        vectors = await self.store.chunk_vectors(owner, embedder.name, embedder.dimensions)
        self._cache[owner] = _CachedVectors(version, embedder.name, vectors)
        self._cache.move_to_end(owner)
        while len(self._cache) > CACHED_OWNERS:
            self._cache.popitem(last=False)
        return vectors


def build_note_service(
    settings: Settings, store: Store, clock: Clock, ids: IdGenerator
) -> NoteService:
    """The notes beside the session store's rows (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: NoteStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.notes import SQLiteNoteStore

        rows = SQLiteNoteStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.notes import PostgresNoteStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no note store for {type(store).__name__}")
        rows = PostgresNoteStore(store)
    return NoteService(rows, build_embedder(settings), ids, clock, settings.notes)


def hits_as_json(hits: Sequence[NoteHit]) -> list[dict[str, object]]:
    """Hits as `GET /v1/notes` and the `notes_search` tool's data show them."""
    return [
        {
            "id": hit.note_id,
            "title": hit.title,
            "source": hit.source,
            "content": hit.content,
            "score": hit.score,
        }
        for hit in hits
    ]
