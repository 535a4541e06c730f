"""The one hybrid search engine notes and memory items share: a keyword ranking from the
store's full-text index and, when embeddings are configured, a semantic ranking by cosine
similarity, fused by reciprocal rank fusion (core/notes.py `reciprocal_rank_fusion`,
k = 60). Each caller brings its own rows (note chunks, memory items), addressed by
integer row ids; the ranking and the fusion are the same code for both.

When the embeddings model fails, a search still answers from its keywords and says so
(`semantic` False), never an error.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import numpy as np

from sessiongate.core.notes import Vectors, reciprocal_rank_fusion
from sessiongate.models.embeddings import Embedder, EmbeddingsFailed
from sessiongate.store.notes import ChunkVectors

#: A row whose cosine similarity to the query is not above this is not a semantic match
#: at all (orthogonal or opposite), however few rows there are.
MIN_SIMILARITY = 0.0

#: Loads the caller's vectors of one embedder (the caller may cache them).
VectorLoader = Callable[[Embedder], Awaitable[ChunkVectors]]


@dataclass(frozen=True, slots=True)
class FusedRanking:
    #: (row id, fused score) best first; ties by row id, the same on every store.
    ranked: list[tuple[int, float]]
    #: Whether semantic ranking took part (embeddings configured and answering).
    semantic: bool


async def fused_ranking(
    query: str,
    keyword: Awaitable[list[int]] | None,
    embedder: Embedder | None,
    vectors: VectorLoader,
    depth: int,
    *,
    what: str = "search",
) -> FusedRanking:
    """Rank rows for `query`: `keyword` (a best-first list of row ids, or None to leave
    keywords out) and, with an `embedder`, the `depth` nearest vectors `vectors` loads,
    run at once and fused. `what` names the caller (logger `sessiongate.<what>`, event
    `<what>_semantic_unavailable`) when the embeddings model fails."""

    async def no_keywords() -> list[int]:
        return []

    async def semantic() -> list[int] | None:
        if embedder is None:
            return None
        try:
            query_vector = (await embedder.embed([query]))[0]
        except EmbeddingsFailed as exc:
            logging.getLogger(f"sessiongate.{what}").warning(
                f"{what}_semantic_unavailable", extra={"error": exc.message}
            )
            return None
        return nearest(await vectors(embedder), query_vector, depth)

    # The keyword query waits on the database while the vectors are ranked.
    keyword_ranking, semantic_ranking = await asyncio.gather(
        keyword if keyword is not None else no_keywords(), semantic()
    )
    rankings = [keyword_ranking] if keyword is not None else []
    if semantic_ranking is not None:
        rankings.append(semantic_ranking)
    return FusedRanking(reciprocal_rank_fusion(rankings), semantic_ranking is not None)


def nearest(vectors: ChunkVectors, query: Vectors, depth: int) -> list[int]:
    """Row ids by cosine similarity to `query`, best first, at most `depth`, only those
    above MIN_SIMILARITY. Rows and query are unit length, so the cosine is a dot product."""
    count = len(vectors.ids)
    if count == 0 or vectors.matrix.shape[1] != query.shape[0]:
        return []
    similarity = vectors.matrix @ query
    # Partition first: the best `depth` of n in O(n), then sort only those.
    best = np.argpartition(-similarity, depth - 1)[:depth] if count > depth else np.arange(count)
    # Best first; equal similarities in row-id order (ids ascend with the rows).
    order = best[np.lexsort((best, -similarity[best]))]
    return [int(vectors.ids[i]) for i in order if similarity[i] > MIN_SIMILARITY]
