"""Conversation titles (core/titles.py) as the session service reads and writes them: a
title its user sets, under the key's lock, and the automatic one read from the first user
message of the chain's first segment. Listings read the automatic title in their own query
(store/key_listing.py); this module answers for one key (`GET` and `PATCH
/v1/sessions/{key}`).
"""

from __future__ import annotations

from collections.abc import Sequence

from sessiongate.core.segments import Role, Segment, SessionKeyRecord
from sessiongate.core.titles import auto_title
from sessiongate.store.base import Store

#: Messages read from the first segment to find its first user message (it is almost
#: always the first; a chain that starts otherwise has no automatic title past these).
FIRST_PAGE = 20


async def first_user_text(store: Store, segments: Sequence[Segment]) -> str | None:
    """The first user message of the chain's first segment (the one no rotation made)."""
    first = next((s for s in segments if s.created_reason is None), None)
    if first is None:
        return None
    page = await store.list_messages(first.session_id, after_seq=0, limit=FIRST_PAGE)
    return next((m.content for m in page if m.role is Role.USER), None)


async def title_of(
    store: Store, record: SessionKeyRecord, segments: Sequence[Segment] | None = None
) -> str | None:
    """The key's title: the one set, else the automatic one (None: no user message yet)."""
    if record.title is not None:
        return record.title
    if segments is None:
        segments = await store.chain(record.ref)
    return auto_title(await first_user_text(store, segments))
