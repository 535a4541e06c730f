"""Memory items (DESIGN.md §13, docs/memory.md): what the assistant knows about a user,
kept per user, editable and forgettable. The service holds the search
(`MemoryService.searcher`, service/memory_search.py) and the turns' choice
(`MemoryService.injection`, service/memory_injection.py), and tells the latter of every
change it makes.

Who writes, and what each write means:
- `add`: a new item (the user over the API or CLI, an agent's `memory_save`, extraction,
  an import), counted against `[limits] max_memory_items_per_user`.
- `update_text`: an update never overwrites: a new item is kept and the old one gets
  `invalid_at` and `superseded_by`, in one transaction. `patch` is the user's own edit: a
  text change supersedes (and remembers the old text's fingerprint as edited away), a pin
  or scope change is made in place and stamps `edited_at`.
- `invalidate`: an item that stopped being true, without a successor (extraction's
  `delete`): it stays in the history, out of every turn.
- `forget`: the user's delete: the item, the earlier versions it superseded and their
  vectors are gone; only a tombstone of each remains (a hash of the normalised text and
  the source, never the text), so `was_forgotten_or_edited` can tell extraction not to
  add the same statement again from the same source.

Another user's item answers exactly as an unknown id (`memory_not_found`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from sessiongate.config import Settings
from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator
from sessiongate.core.memory import (
    MAX_PAGE,
    CreatedBy,
    MemoryItem,
    MemorySource,
    new_memory_id,
    source_matches,
    supersede,
    text_fingerprint,
    validate_limit,
    validate_memory_id,
    validate_memory_text,
    validate_scope,
    validate_source,
)
from sessiongate.core.memory_exchange import ImportedItem
from sessiongate.core.notes import Vectors
from sessiongate.errors import Conflict, InvalidInput, NotFound
from sessiongate.models.embeddings import Embedder, EmbeddingsFailed
from sessiongate.service.memory_injection import MemoryInjection
from sessiongate.service.memory_search import MemorySearcher
from sessiongate.store.base import Store
from sessiongate.store.memory import MemoryStore, Tombstone

log = logging.getLogger("sessiongate.memory")

#: Items a listing page holds unless the caller asks for another number.
DEFAULT_PAGE = 50


class MemoryNotFound(NotFound):
    """Unknown id, or another user's item (never say which)."""

    code = "memory_not_found"


class MemoryInvalid(Conflict):
    """The item was superseded or invalidated: its text and pin are history now."""

    code = "memory_invalid"


#: `patch`'s marker for a field the caller left out (None is a value for nothing here,
#: but keeps the signature plain).
UNSET: Any = object()


class MemoryService:
    def __init__(
        self,
        store: MemoryStore,
        embedder: Embedder | None,
        ids: IdGenerator,
        clock: Clock,
        *,
        max_items_per_user: int = 1000,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.ids = ids
        self.clock = clock
        self.max_items_per_user = max_items_per_user
        self.searcher = MemorySearcher(store, embedder)
        self.injection = MemoryInjection(store, self.searcher)

    def forget_owner(self, user: str) -> None:
        """The user was erased: nothing of theirs stays held here."""
        self._changed(user)

    def _changed(self, user: str) -> None:
        """The user's items changed here: the next turn reads them again."""
        self.injection.changed(user)

    # -- reads ------------------------------------------------------------------------

    async def get(self, user: str, memory_id: object) -> MemoryItem:
        """The user's item (valid or not); MemoryNotFound otherwise."""
        checked = validate_memory_id(memory_id)
        item = await self.store.get_item(user, checked)
        if item is None:
            raise MemoryNotFound(f"no memory item {checked}")
        return item

    async def list_items(
        self,
        user: str,
        *,
        include_invalid: bool = False,
        scope: object = None,
        limit: object = None,
        before: object = None,
    ) -> list[MemoryItem]:
        """The user's items, newest first, a page at a time (`before`: the id of the last
        item of the previous page); only valid ones unless `include_invalid`; `scope`:
        only items of exactly that scope."""
        return await self.store.list_items(
            user,
            include_invalid=include_invalid,
            scope=None if scope is None else validate_scope(scope),
            limit=validate_limit(DEFAULT_PAGE if limit is None else limit, MAX_PAGE),
            before=None if before is None else validate_memory_id(before),
        )

    async def was_forgotten_or_edited(
        self, user: str, source: MemorySource | None, text: str
    ) -> bool:
        """Whether the user forgot this statement, or edited it away, when it came from
        `source` (the same key and, when both name messages, a message in common; a
        statement with no source matches tombstones with none). Extraction asks before it
        adds: the user's own edits win over what a model reads into the conversation.
        Texts compare by `core.memory.text_fingerprint` (case, spacing and surrounding
        punctuation do not matter)."""
        tombstones = await self.store.tombstones(user, text_fingerprint(text))
        return any(source_matches(t.source, source) for t in tombstones)

    # -- writes -----------------------------------------------------------------------

    async def add(
        self,
        user: str,
        text: object,
        *,
        scope: object = None,
        pinned: object = False,
        source: object = None,
        created_by: CreatedBy = "user",
    ) -> MemoryItem:
        """Keep a new item. Raises a 4xx for bad input and MemoryLimitReached (409) when
        the user already keeps `max_items_per_user` valid items."""
        item = MemoryItem(
            memory_id=new_memory_id(self.ids.new()),
            user=user,
            text=validate_memory_text(text),
            scope=validate_scope(scope),
            pinned=_flag(pinned),
            source=validate_source(source),
            created_by=created_by,
            created_at=self.clock.now(),
        )
        vector = await self._embed_one(item.text)
        await self.store.add_item(
            item,
            vector,
            self._embedder_name(vector),
            max_items=self.max_items_per_user,
        )
        self._changed(user)
        return item

    async def update_text(
        self, user: str, memory_id: object, text: object, *, created_by: CreatedBy
    ) -> MemoryItem:
        """Supersede a valid item with a new text (an update never overwrites). By the
        user (`created_by="user"`), the old text is remembered as edited away from its
        source, so extraction does not bring it back. Returns the new item."""
        old = await self.get(user, memory_id)
        if not old.valid:
            raise MemoryInvalid(f"memory item {old.memory_id} was superseded or invalidated")
        checked = validate_memory_text(text)
        new, stored_old = supersede(
            old, new_memory_id(self.ids.new()), checked, created_by, self.clock.now()
        )
        if created_by == "user":
            new = _replace_edited(new)
        tombstone = None
        if created_by == "user":
            tombstone = Tombstone(text_fingerprint(old.text), old.source, "edited")
        vector = await self._embed_one(new.text)
        await self.store.add_item(
            new,
            vector,
            self._embedder_name(vector),
            supersedes=stored_old,
            tombstone=tombstone,
        )
        self._changed(user)
        return new

    async def patch(
        self,
        user: str,
        memory_id: object,
        *,
        text: object = UNSET,
        pinned: object = UNSET,
        scope: object = UNSET,
    ) -> MemoryItem:
        """The user's edit (PATCH /v1/memory/{id}): a new text supersedes the item (the
        pin and scope asked for apply to the new one); a pin or scope alone changes the
        item in place and stamps `edited_at`. Returns the item as it now is."""
        item = await self.get(user, memory_id)
        if not item.valid:
            raise MemoryInvalid(f"memory item {item.memory_id} was superseded or invalidated")
        new_pinned = item.pinned if pinned is UNSET else _flag(pinned)
        new_scope = item.scope if scope is UNSET else validate_scope(scope)
        if text is not UNSET:
            validate_memory_text(text)  # refused before anything changes
        changed = (new_pinned, new_scope) != (item.pinned, item.scope)
        if changed and not await self.store.update_item(
            user, item.memory_id, pinned=new_pinned, scope=new_scope, edited_at=self.clock.now()
        ):
            raise MemoryNotFound(f"no memory item {item.memory_id}")
        self._changed(user)
        if text is not UNSET and validate_memory_text(text) != item.text:
            return await self.update_text(user, item.memory_id, text, created_by="user")
        return await self.get(user, item.memory_id)

    async def invalidate(self, user: str, memory_id: object) -> MemoryItem:
        """Mark a valid item no longer true, without a successor (extraction's `delete`):
        kept in the history, out of every turn. Returns the item as it was."""
        checked = validate_memory_id(memory_id)
        item = await self.store.invalidate_item(user, checked, self.clock.now())
        self._changed(user)
        if item is None:
            raise MemoryNotFound(f"no valid memory item {checked}")
        return item

    async def forget(self, user: str, memory_id: object) -> list[MemoryItem]:
        """Delete the item, the earlier versions it superseded, and their vectors, leaving
        a tombstone of each (a fingerprint, never the text). Returns what went, the named
        item first."""
        checked = validate_memory_id(memory_id)
        gone = await self.store.forget_item(user, checked, self.clock.now())
        self._changed(user)
        if not gone:
            raise MemoryNotFound(f"no memory item {checked}")
        return gone

    # -- export and import ------------------------------------------------------------

    async def export_items(self, user: str) -> list[MemoryItem]:
        """Every item of the user, history included, oldest first."""
        items: list[MemoryItem] = []
        before: str | None = None
        while True:
            page = await self.store.list_items(
                user, include_invalid=True, scope=None, limit=MAX_PAGE, before=before
            )
            items.extend(page)
            if len(page) < MAX_PAGE:
                return list(reversed(items))
            before = page[-1].memory_id

    async def import_items(self, user: str, imported: Sequence[ImportedItem]) -> list[MemoryItem]:
        """Keep the items of an export (core/memory_exchange.py has checked them) as the
        user's, all or nothing: each gets a new id (supersession links within the file
        follow) and `created_by = "import"`."""
        renamed: dict[str, str] = {i.memory_id: new_memory_id(self.ids.new()) for i in imported}
        items = [
            MemoryItem(
                memory_id=renamed[i.memory_id],
                user=user,
                text=i.text,
                scope=i.scope,
                pinned=i.pinned,
                source=i.source,
                created_by="import",
                created_at=i.created_at,
                invalid_at=i.invalid_at,
                superseded_by=None if i.superseded_by is None else renamed.get(i.superseded_by),
                edited_at=i.edited_at,
            )
            for i in imported
        ]
        vectors = await self._embed([i.text for i in items]) if items else None
        await self.store.import_items(
            user,
            items,
            vectors,
            self._embedder_name(vectors),
            max_items=self.max_items_per_user,
        )
        self._changed(user)
        return items

    # -- embeddings -------------------------------------------------------------------

    async def _embed(self, texts: Sequence[str]) -> Vectors | None:
        """Vectors for `texts`, or None without embeddings or when the model fails: the
        items are kept all the same and found by their keywords."""
        if self.embedder is None:
            return None
        try:
            return await self.embedder.embed(list(texts))
        except EmbeddingsFailed as exc:
            log.warning("memory_embeddings_unavailable", extra={"error": exc.message})
            return None

    async def _embed_one(self, text: str) -> Vectors | None:
        vectors = await self._embed([text])
        return None if vectors is None else vectors[0]

    def _embedder_name(self, vectors: Vectors | None) -> str | None:
        return None if vectors is None or self.embedder is None else self.embedder.name


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput("pinned must be true or false", code="invalid_pinned")
    return value


def _replace_edited(item: MemoryItem) -> MemoryItem:
    return replace(item, edited_at=item.created_at)


def build_memory_service(
    settings: Settings,
    store: Store,
    clock: Clock,
    ids: IdGenerator,
    embedder: Embedder | None,
) -> MemoryService:
    """The memory rows beside the session store's (same connection or pool). `embedder`:
    the note service's (`[notes] embeddings`), shared so one model is loaded; the note
    service starts and closes it."""
    from sessiongate.store.sqlite.store import SQLiteStore

    rows: MemoryStore
    if isinstance(store, SQLiteStore):
        from sessiongate.store.sqlite.memory import SQLiteMemoryStore

        rows = SQLiteMemoryStore(store)
    else:
        # Imported here so a SQLite gateway never loads the driver.
        from sessiongate.store.postgres.memory import PostgresMemoryStore
        from sessiongate.store.postgres.store import PostgresStore

        if not isinstance(store, PostgresStore):
            raise TypeError(f"no memory store for {type(store).__name__}")
        rows = PostgresMemoryStore(store)
    return MemoryService(
        rows,
        embedder,
        ids,
        clock,
        max_items_per_user=settings.limits.max_memory_items_per_user,
    )
