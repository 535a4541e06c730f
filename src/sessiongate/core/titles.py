"""A conversation's title: what its user named it, else its first user message, shortened.
Pure.

A key's list of conversations is read by people, and keys such as `oai:chat:<uuid>` say
nothing: the listing (`GET /v1/sessions`, the web page, `sessiongate sessions list`) shows
each key's title beside its name. The automatic title is made when the key is read, from
the first user message of its first segment (so keys made before titles existed have one
too, and nothing is written per turn); a title set with `PATCH /v1/sessions/{key}`
replaces it until it is set to null again.
"""

from __future__ import annotations

import unicodedata

from sessiongate.errors import InvalidInput

#: The longest automatic title, its ellipsis included.
AUTO_TITLE_CHARS = 60
#: The longest title a user may set.
MAX_TITLE_CHARS = 200
#: How much of the first user message a store reads to make the title from: more than
#: enough for AUTO_TITLE_CHARS once runs of whitespace are folded.
TITLE_SOURCE_CHARS = 400
ELLIPSIS = "\u2026"


def auto_title(first_user_text: str | None) -> str | None:
    """The first user message on one line (runs of whitespace folded), cut on a word
    boundary to at most AUTO_TITLE_CHARS with an ellipsis; None without any text."""
    if first_user_text is None:
        return None
    flat = " ".join(first_user_text.split())
    if not flat:
        return None
    if len(flat) <= AUTO_TITLE_CHARS:
        return flat
    room = AUTO_TITLE_CHARS - len(ELLIPSIS)
    if flat[room] == " ":  # the words before the limit end exactly there
        head = flat[:room]
    else:
        cut = flat.rfind(" ", 0, room)
        # A word longer than half the title (a URL, say) is cut inside rather than lost.
        head = flat[:cut] if cut >= room // 2 else flat[:room]
    return head.rstrip(" ,;:-") + ELLIPSIS


def validate_title(title: object) -> str | None:
    """A title a user sets: None (back to the automatic one), or one line of 1 to
    MAX_TITLE_CHARS characters, trimmed. Anything else is `invalid_title` (400)."""
    if title is None:
        return None
    if not isinstance(title, str):
        raise InvalidInput(
            "title must be a string, or null for the automatic title", code="invalid_title"
        )
    trimmed = title.strip()
    if not trimmed:
        raise InvalidInput(
            "title is empty: send null to go back to the automatic title", code="invalid_title"
        )
    if len(trimmed) > MAX_TITLE_CHARS:
        raise InvalidInput(
            f"title is longer than {MAX_TITLE_CHARS} characters", code="invalid_title"
        )
    if any(unicodedata.category(ch) in ("Cc", "Cs") for ch in trimmed):
        raise InvalidInput(
            "title must be one line of text (no control characters)", code="invalid_title"
        )
    return trimmed
