"""Recall rules shared by every store: the words a query searches for, and the fragment
a hit becomes."""

from __future__ import annotations

import re
from datetime import datetime

from sessiongate.core.segments import RecallFragment, Role, message_id
from sessiongate.errors import InvalidInput

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
) -> RecallFragment:
    """One hit; `score` is higher for a better match on every store."""
    return RecallFragment(
        session_id=session_id,
        message_id=message_id(session_id, seq),
        seq=seq,
        role=Role(role),
        content=content,
        score=round(score, 6),
        rationale=rationale,
        created_at=created_at,
    )
