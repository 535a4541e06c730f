"""Recall rules shared by every store: the words a query searches for, the fragment a hit
becomes, and the recall index port (`RecallIndex`): keyword ranking, message vectors and
the rows of a ranking, over the messages a recall may read (DESIGN.md §13).

A message is recallable when its segment is archived (not its key's latest) or, for a
recall over every key (scope "all"), is the live segment of another key than the one
asking; it is not in a segment the caller's context reads already, the offline stand-in
did not write it (core/context.py) and the safety gate did not classify it UNSAFE
(service/turn/safety_gate.py): what the gate refused never returns through recall.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from sessiongate.core.notes import Vectors
from sessiongate.core.segments import RecallFragment, Role, message_id
from sessiongate.errors import InvalidInput
from sessiongate.store.notes import ChunkVectors

_WORD_RE = re.compile(r"[^\W_]+", re.UNICODE)
#: More words than this add nothing to ranking and only cost the full-text engine.
MAX_RECALL_WORDS = 32


def recall_words(query: str) -> list[str]:
    """Letters and digits runs of `query`, at most MAX_RECALL_WORDS. Raises InvalidInput
    when there is nothing to search for."""
    words = _WORD_RE.findall(query)
    if not words:
        raise InvalidInput("recall query has no searchable words", code="invalid_recall")
    return words[:MAX_RECALL_WORDS]


def recall_fragment(
    session_id: str,
    seq: int,
    role: str,
    content: str,
    created_at: datetime,
    *,
    score: float,
    rationale: str,
    key: str | None = None,
) -> RecallFragment:
    """One hit; `score` is higher for a better match on every store. `key`: the name of
    the key it was found in."""
    return RecallFragment(
        session_id=session_id,
        message_id=message_id(session_id, seq),
        seq=seq,
        role=Role(role),
        content=content,
        score=round(score, 6),
        rationale=rationale,
        created_at=created_at,
        key=key,
    )


@dataclass(frozen=True, slots=True)
class RecallScope:
    """Where a recall looks: the owner's keys (`key` None: every one of them, scope
    "all"), never the segments `exclude` names (those the context reads already).
    Archived segments only, unless `live`: then the newest segments of the owner's keys
    too, except `asker`'s (the asking key's thread is in its context)."""

    owner: str
    #: The key's storage id (`KeyRef.storage_id`), or None for every key of `owner`.
    key: str | None
    exclude: tuple[str, ...] = ()
    #: The live (newest) segments are recallable too (scope "all").
    live: bool = False
    #: With `live`: the asking key's storage id, whose live segment stays out.
    asker: str | None = None


@dataclass(frozen=True, slots=True)
class RecallRow:
    """One recallable message, addressed by its row id (`messages.id`)."""

    row_id: int
    #: The key's storage id.
    key: str
    session_id: str
    seq: int
    role: str
    content: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Unembedded:
    """A recallable message (archived, or in a live segment) that has no vector of the
    configured embedder yet."""

    session_id: str
    seq: int
    content: str


class RecallIndex(Protocol):
    async def catch_up(self, owner: str) -> int:
        """Bring the owner's live segments' messages into the keyword index (a segment's
        messages enter it when it is archived; a live one's lazily, here, never on
        append); how many messages were added."""
        ...

    async def keyword(self, scope: RecallScope, words: Sequence[str], depth: int) -> list[int]:
        """Row ids of the recallable messages matching any of `words`, best first (the
        full-text engine's rank, ties by row id), at most `depth`."""
        ...

    async def vectors(self, scope: RecallScope, embedder: str, dimensions: int) -> ChunkVectors:
        """The recallable messages' vectors made by `embedder`, by row id."""
        ...

    async def rows(self, scope: RecallScope, row_ids: Sequence[int]) -> list[RecallRow]:
        """Those of `row_ids` that are still recallable in `scope` (any order)."""
        ...

    async def unembedded(self, owner: str, embedder: str, limit: int) -> list[Unembedded]:
        """Up to `limit` of the owner's recallable messages, archived or in a live
        segment of any key, without a vector of `embedder`, oldest first."""
        ...

    async def put_vectors(
        self, messages: Sequence[Unembedded], embedder: str, vectors: Vectors
    ) -> None:
        """Keep one vector per message (replacing another embedder's); a message whose
        segment was erased meanwhile is skipped."""
        ...
