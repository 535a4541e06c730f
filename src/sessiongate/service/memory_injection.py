"""The memory items a turn is given (DESIGN.md §13, docs/memory.md): the user's pinned
items whose scope covers the turn and, with `inject = "relevant"`, the best others by a
search against the new message (service/memory_search.py), chosen by core/memory.py
`choose_items`; service/turn/memory_context.py fits them to the budget.

Most users pin nothing, so "this user has no pinned item" is believed for a few seconds
instead of read on every turn; a user who has pinned items is read on every turn.
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict

from sessiongate.config.memory import MemoryPolicy
from sessiongate.core.memory import Injected, MemoryItem, applies_to, choose_items
from sessiongate.service.memory_search import MemorySearcher
from sessiongate.store.memory import MemoryStore

log = logging.getLogger("sessiongate.memory")

#: A turn's relevant items come from the best this-many (at least 4 * max_items) of each
#: ranking: deeper lists would only be read to be dropped.
RELEVANT_DEPTH = 24
#: How long "this user has no pinned items" is believed without a read. This process's
#: own writes end it at once; an item pinned through another gateway or the CLI shows
#: within this. A user who has pinned items is read on every turn, so a forget or an
#: unpin anywhere holds for the very next turn.
PINNED_TTL_SECONDS = 5.0
#: Users believed to have no pinned item at once (the least recently used go first).
PINNED_CACHE_USERS = 10_000


class MemoryInjection:
    """Chooses a turn's items; told of every change this process makes to a user's items
    (`changed`), so its belief that a user pins nothing never outlives one."""

    def __init__(self, store: MemoryStore, searcher: MemorySearcher) -> None:
        self.store = store
        self.searcher = searcher
        #: Per user who had no valid pinned item, when that was read (`time.monotonic`):
        #: the read every turn would otherwise make, most users having none
        #: (docs/memory.md).
        self._unpinned: OrderedDict[str, float] = OrderedDict()

    def changed(self, user: str) -> None:
        """The user's items changed here (or the user was erased): the next turn reads
        them again."""
        self._unpinned.pop(user, None)

    async def items_for_turn(
        self, user: str, agent: str, policy: MemoryPolicy, key: str, new_message: str | None
    ) -> list[Injected]:
        """The items a turn of `agent` on `key` receives before its budget (core/memory.py
        `choose_items`, `fit_memory` cuts them later): pinned ones, and with `relevant`
        the best `policy.max_items` others by hybrid search against `new_message` (none
        without one, as for the preview of the next turn). A search that fails leaves the
        turn with its pinned items."""
        if policy.inject == "off":
            return []
        # Only the pinned items and the search's best candidates are read: a user may keep
        # a thousand items, and turning each row into an item costs tens of microseconds.
        items = [i for i in await self._pinned_items(user) if applies_to(i, agent, key)]
        scores: dict[str, float] = {}
        if policy.inject == "relevant" and policy.max_items > 0 and new_message:
            query = new_message[: 4 * 2000]  # a long message: its start says what it is about
            depth = max(RELEVANT_DEPTH, 4 * policy.max_items)
            try:
                ranked, _ = await self.searcher.rank(user, query, depth)
            except Exception:  # the pinned items still go in
                log.exception("memory_search_failed", extra={"user": user})
                ranked = []
            for item, score in ranked:
                if not item.pinned and applies_to(item, agent, key):
                    items.append(item)
                    scores[item.memory_id] = score
        return choose_items(items, policy.inject, scores, policy.max_items)

    async def _pinned_items(self, user: str) -> list[MemoryItem]:
        now = time.monotonic()
        read_at = self._unpinned.get(user)
        if read_at is not None and now - read_at < PINNED_TTL_SECONDS:
            self._unpinned.move_to_end(user)
            return []
        items = await self.store.valid_items(user, pinned_only=True)
        if items:  # never held: a forget or unpin must hold for the next turn
            self._unpinned.pop(user, None)
            return items
        self._unpinned[user] = now
        self._unpinned.move_to_end(user)
        while len(self._unpinned) > PINNED_CACHE_USERS:
            self._unpinned.popitem(last=False)
        return items
