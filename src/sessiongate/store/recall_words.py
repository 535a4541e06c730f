"""The words a recall query searches for: the same on every store."""

from __future__ import annotations

import re

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
