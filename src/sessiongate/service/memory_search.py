"""Searching a user's memory items (DESIGN.md §13, docs/memory.md): their keywords fused
with their vectors when embeddings are configured (the shared engine,
service/hybrid_search.py), only valid items, best first. The memory service's
`searcher` answers the API's `GET /v1/memory/search`, the `memory_search` tool and
extraction, and ranks a turn's relevant items (service/memory_injection.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sessiongate.core.memory import (
    MAX_SEARCH_LIMIT,
    MemoryItem,
    applies_to,
    item_json,
    validate_limit,
    validate_query,
)
from sessiongate.core.notes import search_words
from sessiongate.models.embeddings import Embedder
from sessiongate.service.hybrid_search import fused_ranking
from sessiongate.store.memory import MemoryStore
from sessiongate.store.notes import ChunkVectors

#: Items a search holds unless the caller asks for another number.
DEFAULT_SEARCH_LIMIT = 10
#: Each ranking contributes its best this-many items to the fusion.
CANDIDATES = 50


@dataclass(frozen=True, slots=True)
class MemoryHit:
    item: MemoryItem
    score: float


@dataclass(frozen=True, slots=True)
class MemorySearch:
    hits: list[MemoryHit]
    #: Whether semantic ranking took part (embeddings configured and answering).
    semantic: bool


class MemorySearcher:
    """Ranks the user's valid items for a query over the memory store's rows."""

    def __init__(self, store: MemoryStore, embedder: Embedder | None) -> None:
        self.store = store
        self.embedder = embedder

    async def search(
        self,
        user: str,
        query: object,
        limit: object = None,
        *,
        agent: str | None = None,
        key: str | None = None,
    ) -> MemorySearch:
        """The user's valid items that best match `query` (keywords fused with embeddings
        when configured), best first. With `agent` and `key`, only the items whose scope
        covers a turn of that agent on that key (what the memory tools see)."""
        text = validate_query(query)
        wanted = validate_limit(DEFAULT_SEARCH_LIMIT if limit is None else limit, MAX_SEARCH_LIMIT)
        depth = max(CANDIDATES, wanted * 4)
        ranked, semantic = await self.rank(user, text, depth)
        hits = [
            MemoryHit(item, score)
            for item, score in ranked
            if agent is None or key is None or applies_to(item, agent, key)
        ]
        return MemorySearch(hits[:wanted], semantic)

    async def rank(
        self, user: str, query: str, depth: int
    ) -> tuple[list[tuple[MemoryItem, float]], bool]:
        """The user's valid items for `query` with their fused scores, best first (at most
        `depth` from each ranking), and whether semantic ranking took part."""
        fused = await fused_ranking(
            query,
            self.store.keyword_items(user, search_words(query), depth),
            self.embedder,
            lambda embedder: self._vectors(user, embedder),
            depth,
            what="memory",
        )
        found = await self.store.items_by_row(user, [row for row, _ in fused.ranked])
        ranked = [
            (item, round(score, 6))
            for row, score in fused.ranked
            if (item := found.get(row)) is not None and item.valid  # changed meanwhile: out
        ]
        return ranked, fused.semantic

    async def _vectors(self, user: str, embedder: Embedder) -> ChunkVectors:
        # A user keeps a bounded number of items: read each time, no cache to keep fresh.
        return await self.store.item_vectors(user, embedder.name, embedder.dimensions)


def hits_as_json(
    hits: Sequence[MemoryHit], iso: Callable[[datetime], str]
) -> list[dict[str, object]]:
    """Hits as `GET /v1/memory/search` and the memory_search tool show them."""
    return [{**item_json(h.item, iso), "score": h.score} for h in hits]
