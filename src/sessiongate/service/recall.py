"""Explicit recall's search (DESIGN.md §2.4 and §13, "Recall across keys"): what a recall
request finds, with scope "key" (the key's own archived segments) or "all" (every key of
the caller's owner, never another user's: their archived segments, and the live segments
of every key but the asking one, whose thread is in its context).

Keyword ranking (the store's full-text index over recallable messages) always runs; when
`[notes] embeddings` is configured, the query is embedded too and the recallable messages'
vectors are ranked by cosine similarity, and the two rankings are fused by the engine
notes and memory items share (service/hybrid_search.py, reciprocal rank fusion). A
fragment's score is the fused one, higher is better, the same on both stores.

A live segment's messages are indexed lazily, never on append (the turn's write path
stays as it was): a scope "all" recall first brings the owner's live messages into the
keyword index (`RecallIndex.catch_up`), and when it added any, forgets what it trusted of
the owner's vectors, so the same recall embeds them too.

Message vectors are derived data, kept in `message_vectors`. A rotation archives a
segment; right after it, a background task embeds the owner's messages that have no
vector yet (at most EMBED_BACKGROUND per rotation). A recall first embeds what is still
missing, at most EMBED_INLINE messages (an imported history, a gateway that just turned
embeddings on, live messages said since), so a recall never waits on a whole history.
What this process learnt (an owner's vector matrix, "nothing left to embed") is trusted
for TRUST_SECONDS, and forgotten at once on a rotation, new vectors or newly indexed live
messages here. When the embeddings model fails, a recall answers from its keywords alone
and logs it; it is never an error.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sessiongate.core.keys import KeyRef
from sessiongate.core.segments import RecallFragment, RotationRecord
from sessiongate.errors import InvalidInput
from sessiongate.models.embeddings import Embedder, EmbeddingsFailed
from sessiongate.service.hybrid_search import fused_ranking
from sessiongate.store.base import Store
from sessiongate.store.notes import ChunkVectors
from sessiongate.store.recall import (
    RecallIndex,
    RecallScope,
    recall_fragment,
    recall_words,
)

log = logging.getLogger("sessiongate.recall")

Scope = Literal["key", "all"]
SCOPES: tuple[Scope, ...] = ("key", "all")
#: Each ranking contributes its best this-many messages to the fusion (as notes do).
CANDIDATES = 50
#: Messages a recall embeds before it searches, at most (the rest wait for the next).
EMBED_INLINE = 2000
#: Messages the background task embeds after one rotation, at most.
EMBED_BACKGROUND = 5000
#: Texts per call to the embeddings model.
EMBED_BATCH = 256
#: The characters of a message that are embedded (an embeddings server has a token limit).
EMBED_CHARS = 4000
#: How long a recall trusts what this process learnt of an owner's vectors without asking
#: the store again: a loaded vector matrix, and "nothing left to embed". A rotation or an
#: embedding here forgets the owner at once; this bounds what another gateway process
#: changed meanwhile (a fragment erased meanwhile is never returned: its row is read again).
TRUST_SECONDS = 30.0
#: Vector matrices kept (one per recall scope: owner, keys, left-out segments), least recent
#: first out.
CACHED_MATRICES = 64


def validate_scope(scope: object) -> Scope:
    """ "key" or "all"; anything else is a 400 (`invalid_recall`)."""
    if scope == "key":
        return "key"
    if scope == "all":
        return "all"
    raise InvalidInput('recall scope must be "key" or "all"', code="invalid_recall")


class RecallSearch:
    def __init__(self, index: RecallIndex, embedder: Embedder | None) -> None:
        self.index = index
        self.embedder = embedder
        self._embedding: dict[str, asyncio.Lock] = {}
        self._background: set[asyncio.Task[None]] = set()
        #: Owner → when embed_missing last found nothing left to embed (monotonic).
        self._embedded_at: dict[str, float] = {}
        self._matrices: OrderedDict[tuple[RecallScope, str], _Matrix] = OrderedDict()

    async def search(
        self,
        ref: KeyRef,
        query: str,
        *,
        rationale: str,
        limit: int,
        scope: Scope = "key",
        exclude_session_ids: Sequence[str] = (),
        keyword: bool = True,
        semantic: bool = True,
    ) -> list[RecallFragment]:
        """The best `limit` recallable messages for `query`, best first, each carrying
        the `rationale`. `keyword`/`semantic` leave a ranking out (the benchmark measures
        each alone); semantic ranking needs embeddings configured."""
        if scope == "all":
            where = RecallScope(
                ref.owner, None, tuple(exclude_session_ids), live=True, asker=ref.storage_id
            )
            if await self.index.catch_up(ref.owner):
                self.forget(ref.owner)  # new live messages: embed them, reload the vectors
        else:
            where = RecallScope(ref.owner, ref.storage_id, tuple(exclude_session_ids))
        depth = max(CANDIDATES, limit)
        embedder = self.embedder if semantic else None
        if embedder is not None and not _trusted(self._embedded_at.get(ref.owner)):
            await self.embed_missing(ref.owner, EMBED_INLINE)
        ranking = await fused_ranking(
            query,
            self.index.keyword(where, recall_words(query), depth) if keyword else None,
            embedder,
            lambda e: self._vectors(where, e),
            depth,
            what="recall",
        )
        best = ranking.ranked[:limit]
        found = {row.row_id: row for row in await self.index.rows(where, [i for i, _ in best])}
        return [
            recall_fragment(
                row.session_id,
                row.seq,
                row.role,
                row.content,
                row.created_at,
                score=score,
                rationale=rationale,
                key=KeyRef.from_storage_id(row.key).name,
            )
            for row_id, score in best
            if (row := found.get(row_id)) is not None  # erased meanwhile: left out
        ]

    async def _vectors(self, where: RecallScope, embedder: Embedder) -> ChunkVectors:
        """The recallable vectors of `where`, from the cache while it is trusted."""
        key = (where, embedder.name)
        cached = self._matrices.get(key)
        if cached is not None and _trusted(cached.loaded_at):
            self._matrices.move_to_end(key)
            return cached.vectors
        loaded_at = time.monotonic()
        vectors = await self.index.vectors(where, embedder.name, embedder.dimensions)
        self._matrices[key] = _Matrix(loaded_at, vectors)
        self._matrices.move_to_end(key)
        while len(self._matrices) > CACHED_MATRICES:
            self._matrices.popitem(last=False)
        return vectors

    def forget(self, owner: str) -> None:
        """What this process learnt of the owner's vectors no longer holds (a rotation,
        new vectors)."""
        self._embedded_at.pop(owner, None)
        for key in [k for k in self._matrices if k[0].owner == owner]:
            del self._matrices[key]

    async def embed_missing(self, owner: str, budget: int) -> int:
        """Embed up to `budget` of the owner's recallable messages (archived, or in a
        live segment) that have no vector of the configured embedder; how many were
        embedded. One owner at a time."""
        embedder = self.embedder
        if embedder is None:
            return 0
        lock = self._embedding.setdefault(owner, asyncio.Lock())
        done = 0
        try:
            async with lock:
                await embedder.start()
                while done < budget:
                    batch = await self.index.unembedded(
                        owner, embedder.name, min(EMBED_BATCH, budget - done)
                    )
                    if not batch:
                        break
                    vectors = await embedder.embed([m.content[:EMBED_CHARS] for m in batch])
                    await self.index.put_vectors(batch, embedder.name, vectors)
                    self.forget(owner)
                    done += len(batch)
                if done < budget:  # nothing left: a recall need not ask for a while
                    self._embedded_at[owner] = time.monotonic()
        except EmbeddingsFailed as exc:
            log.warning("recall_embedding_failed", extra={"owner": owner, "error": exc.message})
        finally:
            if not lock.locked():
                self._embedding.pop(owner, None)
        return done

    def rotated(self, record: RotationRecord) -> None:
        """A rotation archived a segment (service/sessions.py `on_rotation`): embed the
        owner's new archived messages in the background."""
        self.forget(record.key.owner)
        if self.embedder is None:
            return
        task = asyncio.get_running_loop().create_task(self._embed_later(record.key.owner))
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _embed_later(self, owner: str) -> None:
        try:
            await self.embed_missing(owner, EMBED_BACKGROUND)
        except Exception:  # a background task has nobody to raise to: log it
            log.exception("recall_embedding_failed", extra={"owner": owner})

    async def aclose(self) -> None:
        """Stop the background embedding (on shutdown)."""
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class _Matrix:
    loaded_at: float
    vectors: ChunkVectors


def _trusted(since: float | None) -> bool:
    return since is not None and time.monotonic() - since < TRUST_SECONDS


def build_recall_index(store: Store) -> RecallIndex:
    """The recall index beside the session store's rows (same connection or pool)."""
    from sessiongate.store.sqlite.store import SQLiteStore

    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.recall_index import SQLiteRecallIndex

        return SQLiteRecallIndex(store)
    # Imported here so a SQLite gateway never loads the driver.
    from sessiongate.store.postgres.recall_index import PostgresRecallIndex
    from sessiongate.store.postgres.store import PostgresStore

    if not isinstance(store, PostgresStore):
        raise TypeError(f"no recall index for {type(store).__name__}")
    return PostgresRecallIndex(store)
