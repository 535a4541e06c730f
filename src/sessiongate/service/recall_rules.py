"""Explicit history recall (DESIGN.md §2.4): what a recall request must hold, checked
before a turn changes anything, and which segments the context already reads, so a
recall searches only the rest. The search itself is the store's (store/recall.py).
"""

from __future__ import annotations

from sessiongate.core.segments import Segment
from sessiongate.errors import InvalidInput
from sessiongate.service.recall import validate_scope
from sessiongate.store.recall import recall_words


def validate_recall(query: object, rationale: object, limit: object, scope: object = "key") -> None:
    """Everything a recall needs, checked before a turn changes anything (a bad recall on
    `/new hello` must not rotate first and fail after). `scope`: "key" or "all"
    (DESIGN.md §13)."""
    validate_scope(scope)
    if not isinstance(rationale, str) or not rationale.strip():
        raise InvalidInput("recall needs a rationale", code="invalid_recall")
    if not isinstance(query, str) or not query.strip() or len(query) > 2000:
        raise InvalidInput("recall query must be 1-2000 characters", code="invalid_recall")
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
        raise InvalidInput("recall limit must be between 1 and 50", code="invalid_recall")
    recall_words(query)  # a query of punctuation alone has nothing to search for


def thread_segment_ids(segment: Segment) -> tuple[str, ...]:
    """The segments whose messages the context may read directly (not via recall)."""
    return (segment.session_id, *segment.continues)
