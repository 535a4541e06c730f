"""Session operations other than running a turn: rotate, revert, recall, inspect, export.

Every operation that changes a key runs under that key's lock, so it never interleaves
with a turn on the same key.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sessiongate.core.clock import Clock
from sessiongate.core.ids import IdGenerator, is_session_id
from sessiongate.core.key_pages import MAX_PAGE as MAX_KEY_PAGE
from sessiongate.core.key_pages import (
    KeyPage,
    decode_cursor,
    listing_owner,
    page_of,
    page_size,
)
from sessiongate.core.keys import KeyRef
from sessiongate.core.rotation import ActionKind, LifecycleAction, LifecyclePolicy, manual_action
from sessiongate.core.segments import (
    KeySummary,
    Message,
    MessageStatus,
    RecallFragment,
    Role,
    RotationReason,
    RotationRecord,
    Segment,
    SessionKeyRecord,
)
from sessiongate.core.session_caps import SessionCaps
from sessiongate.core.titles import validate_title
from sessiongate.core.users import Caller
from sessiongate.errors import (
    InvalidInput,
    InvalidSessionId,
    NothingToRevert,
    SegmentNotFound,
    SessionNotFound,
)
from sessiongate.service.overrides import (
    OverrideTargets,
    apply_lifecycle_overrides,
    merge_overrides,
    validate_overrides,
)
from sessiongate.service.recall import RecallSearch, build_recall_index, validate_scope
from sessiongate.service.recall_rules import thread_segment_ids, validate_recall
from sessiongate.service.session_exchange import ChainExchange
from sessiongate.service.thread_cache import ThreadCache
from sessiongate.service.titles import title_of
from sessiongate.store.base import Store
from sessiongate.store.locks import KeyLocks

__all__ = ["Caller", "ChainView", "SessionService"]

RotationListener = Callable[[RotationRecord], None]
#: Called when this process changed what counts of keys read (seed 001's /api/health).
KeysChanged = Callable[[], None]
#: Awaited after a key is erased, still under its lock (its artifacts go too).
EraseHook = Callable[[KeyRef], Awaitable[object]]
MAX_PAGE = 1000
#: Sequence numbers and page cursors are stored as signed 64-bit integers.
MAX_SEQ = 2**63 - 1


@dataclass(frozen=True, slots=True)
class ChainView:
    key: SessionKeyRecord
    latest: Segment
    segments: list[Segment]
    rotations: list[RotationRecord]
    #: The title set, else the automatic one (core/titles.py).
    title: str | None = None


class SessionService(ChainExchange):
    def __init__(
        self,
        store: Store,
        clock: Clock,
        ids: IdGenerator,
        policy: LifecyclePolicy,
        locks: KeyLocks,
        max_content_chars: int = 100_000,
        override_targets: OverrideTargets | None = None,
        caps: SessionCaps | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.ids = ids
        self.policy = policy
        self.locks = locks
        self.max_content_chars = max_content_chars
        self.override_targets = override_targets or OverrideTargets()
        #: `[limits] max_keys_per_user` and `max_segments_per_key`, enforced by the store
        #: in the transaction that would pass them (core/session_caps.py).
        self.caps = caps or SessionCaps()
        self.threads = ThreadCache()
        store.on_key_changed(self._key_changed_elsewhere)
        self._listeners: list[RotationListener] = []
        self._erase_hooks: list[EraseHook] = []
        self._keys_changed: list[KeysChanged] = []
        self._recall_search: RecallSearch | None = None

    # -- hooks ------------------------------------------------------------------

    def on_rotation(self, listener: RotationListener) -> None:
        """Called after every rotation and in-place clear is committed."""
        self._listeners.append(listener)

    def _announce(self, record: RotationRecord) -> None:
        for listener in self._listeners:
            listener(record)

    def on_keys_changed(self, listener: KeysChanged) -> None:
        """Called (synchronously, right after the write) when this process creates,
        imports or erases a key, or writes a segment's first message (what makes a key
        count as created through a seed 001 endpoint). Turns on keys that exist already
        call nothing, so a listener may drop a cache without paying for it under load."""
        self._keys_changed.append(listener)

    def keys_changed(self) -> None:
        for listener in self._keys_changed:
            listener()

    # -- records ----------------------------------------------------------------

    async def existing(self, ref: KeyRef) -> SessionKeyRecord:
        """The key's record, or SessionNotFound. Keys live in their owner's namespace
        (`Caller.key` chose `ref`), so nothing here can reveal another user's key."""
        record = await self.store.get_key(ref)
        if record is None:
            raise SessionNotFound(f"no session with key {ref.name!r}")
        return record

    def policy_for(self, record: SessionKeyRecord) -> LifecyclePolicy:
        """The global lifecycle policy with this key's overrides applied."""
        return apply_lifecycle_overrides(self.policy, record.overrides.get("lifecycle") or {})

    async def set_overrides(
        self, key: str, caller: Caller, changes: dict[str, Any]
    ) -> SessionKeyRecord:
        """Merge `changes` into the key's overrides; a None value removes that override."""
        ref = caller.key(key, write=True)
        async with self.locks.hold(ref):
            record = await self.existing(ref)
            merged = merge_overrides(record.overrides, changes)
            cleaned = validate_overrides(merged, self.policy, self.override_targets)
            return await self.store.set_overrides(ref, cleaned)

    async def set_title(self, key: str, caller: Caller, title: object) -> str | None:
        """Name the key's conversation (None: back to the automatic title); returns the
        title it has now. A bad title (`invalid_title`) changes nothing."""
        cleaned = validate_title(title)
        ref = caller.key(key, write=True)
        async with self.locks.hold(ref):
            await self.existing(ref)
            record = await self.store.set_title(ref, cleaned)
        return await title_of(self.store, record)

    def _key_changed_elsewhere(self, ref: KeyRef | None) -> None:
        if ref is None:
            self.threads.clear()
        else:
            self.threads.drop(ref)

    async def thread_tail(
        self, ref: KeyRef, segment: Segment, limit: int, *, remember: bool = True
    ) -> list[Message]:
        """The newest `limit` messages of the segment's thread, from the cache when the
        store's view of the segment still matches it. `remember=False` reads without
        replacing the cached window (a smaller read would shrink it)."""
        cached = self.threads.get(ref, segment, limit)
        if cached is not None:
            return cached
        messages = await self.store.thread_tail(segment, limit)
        if remember:
            self.threads.put(ref, segment, limit, messages)
        return messages

    async def append_message(
        self,
        ref: KeyRef,
        session_id: str,
        *,
        role: Role,
        content: str,
        now: datetime,
        status: MessageStatus = MessageStatus.COMPLETE,
        metadata: dict[str, Any] | None = None,
    ) -> Message:
        message = await self.store.append_message(
            session_id, role=role, content=content, now=now, status=status, metadata=metadata
        )
        self.threads.appended(ref, message)
        if message.seq == 1:
            self.keys_changed()
        return message

    async def open_key(self, ref: KeyRef) -> tuple[SessionKeyRecord, Segment]:
        """Resolve a key for writing, creating it (with its first segment) when new."""
        record = await self.store.get_key(ref)
        if record is None:
            return await self._create_key(ref)
        return record, await self.store.latest_segment(ref)

    async def _create_key(self, ref: KeyRef) -> tuple[SessionKeyRecord, Segment]:
        created = await self.store.create_key(
            ref, self.ids.new(), self.clock.now(), max_keys=self.caps.max_keys_per_user
        )
        self.keys_changed()
        return created

    # -- lifecycle --------------------------------------------------------------

    async def apply(
        self, ref: KeyRef, segment: Segment, action: LifecycleAction, now: datetime
    ) -> tuple[Segment, RotationRecord]:
        """Commit a decided action (caller holds the key's lock) and announce it."""
        if action.kind is ActionKind.CLEAR_IN_PLACE:
            new_segment, record = await self.store.clear_in_place(
                ref, expected_latest=segment.session_id, reason=action.reason, now=now
            )
        else:
            new_segment, record = await self.store.rotate(
                ref,
                expected_latest=segment.session_id,
                new_session_id=self.ids.new(),
                reason=action.reason,
                now=now,
                confidence=action.confidence,
                deciding_model=action.deciding_model,
                max_segments=self.caps.max_segments_per_key,
            )
        self._announce(record)
        return new_segment, record

    async def rotate_now(self, key: str, caller: Caller) -> tuple[Segment, RotationRecord | None]:
        """`/new` by API. A key seen for the first time is simply created."""
        ref = caller.key(key, write=True)
        async with self.locks.hold(ref):
            record = await self.store.get_key(ref)
            if record is None:
                _, segment = await self._create_key(ref)
                return segment, None
            segment = await self.store.latest_segment(ref)
            action = manual_action(self.policy_for(record))
            return await self.apply(ref, segment, action, self.clock.now())

    async def revert(self, key: str, caller: Caller) -> tuple[Segment, RotationRecord]:
        """Undo the last semantic rotation: a continuation segment whose thread is the
        archived segment before the split followed by the one after it. Nothing is
        rewritten; nothing is lost."""
        ref = caller.key(key, write=True)
        async with self.locks.hold(ref):
            await self.existing(ref)
            rotations = await self.store.rotations(ref)
            latest = await self.store.latest_segment(ref)
            last = rotations[-1] if rotations else None
            if (
                last is None
                or last.reason is not RotationReason.SEMANTIC
                or last.to_session_id != latest.session_id
            ):
                raise NothingToRevert(
                    f"the latest segment of {key!r} was not made by a semantic rotation"
                )
            new_segment, record = await self.store.rotate(
                ref,
                expected_latest=latest.session_id,
                new_session_id=self.ids.new(),
                reason=RotationReason.REVERT,
                now=self.clock.now(),
                continues=(last.from_session_id, last.to_session_id),
                extra_parents=(last.from_session_id,),
                max_segments=self.caps.max_segments_per_key,
            )
            self._announce(record)
            return new_segment, record

    # -- reads ------------------------------------------------------------------

    async def recall(
        self,
        key: str,
        caller: Caller,
        query: str,
        rationale: str,
        limit: int = 5,
        *,
        owner: str | None = None,
        scope: str = "key",
    ) -> list[RecallFragment]:
        """Explicit history recall. The rationale is mandatory: it is why the history is
        being looked at, and it travels with every fragment. `scope` "all" searches every
        key of the key's owner (DESIGN.md §13), never the segments the key's context reads;
        the key itself need not exist yet (a first message in a new key may recall)."""
        ref = caller.key(key, owner=owner)
        validate_recall(query, rationale, limit, scope)
        where = validate_scope(scope)
        if where == "key" or await self.store.get_key(ref) is not None:
            await self.existing(ref)
            exclude = thread_segment_ids(await self.store.latest_segment(ref))
        else:
            exclude = ()
        return await self.recall_search.search(
            ref,
            query,
            rationale=rationale.strip(),
            limit=limit,
            scope=where,
            exclude_session_ids=exclude,
        )

    @property
    def recall_search(self) -> RecallSearch:
        """Recall's search: the engine's (with the embedder, service/engine.py), else a
        keyword-only one over this store."""
        if self._recall_search is None:
            self._recall_search = RecallSearch(build_recall_index(self.store), None)
        return self._recall_search

    @recall_search.setter
    def recall_search(self, search: RecallSearch) -> None:
        self._recall_search = search

    async def count_keys(self) -> int:
        """How many keys exist, all owners together (seed 001's health counts)."""
        return await self.store.count_keys()

    async def list_page(
        self,
        caller: Caller,
        *,
        owner: str | None = None,
        cursor: str | None = None,
        limit: int | str | None = None,
    ) -> KeyPage:
        """One page of the caller's keys (an admin's: everyone's, or `owner`'s), in the
        stable order of core/key_pages.py; `cursor` is the previous page's next_cursor."""
        size = page_size(limit)
        scope = listing_owner(caller, owner)
        after = None if cursor is None else decode_cursor(cursor, scope)
        fetched = await self.store.list_keys(scope, after=after, limit=size + 1)
        return page_of(scope, fetched, size)

    async def every_key(
        self, caller: Caller, *, owner: str | None = None
    ) -> AsyncIterator[KeySummary]:
        """Every key `list_page` would list, page after page (the CLI)."""
        cursor: str | None = None
        while True:
            page = await self.list_page(caller, owner=owner, cursor=cursor, limit=MAX_KEY_PAGE)
            for summary in page.keys:
                yield summary
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def show(self, key: str, caller: Caller, *, owner: str | None = None) -> ChainView:
        ref = caller.key(key, owner=owner)
        record = await self.existing(ref)
        segments = await self.store.chain(ref)
        latest = next(s for s in segments if s.session_id == record.latest_session_id)
        rotations = await self.store.rotations(ref)
        title = await title_of(self.store, record, segments)
        return ChainView(record, latest, segments, rotations, title)

    async def latest(self, key: str, caller: Caller, *, owner: str | None = None) -> Segment:
        ref = caller.key(key, owner=owner)
        await self.existing(ref)
        return await self.store.latest_segment(ref)

    async def history(self, ref: KeyRef, limit: int) -> tuple[Segment | None, list[Message]]:
        """The latest segment and the newest `limit` messages of its thread, or
        (None, []) for a key not used yet (a client's first connection)."""
        record = await self.store.get_key(ref)
        if record is None:
            return None, []
        segment = await self.store.latest_segment(ref)
        return segment, await self.thread_tail(ref, segment, limit, remember=False)

    async def messages(
        self,
        key: str,
        caller: Caller,
        session_id: str,
        *,
        after: int = 0,
        limit: int = 100,
        owner: str | None = None,
    ) -> list[Message]:
        ref = caller.key(key, owner=owner)
        if not is_session_id(session_id):
            raise InvalidSessionId(f"{session_id!r} is not a session id")
        if not 0 <= after <= MAX_SEQ or not 1 <= limit <= MAX_PAGE:
            raise InvalidInput(
                f"after must be between 0 and {MAX_SEQ}, limit between 1 and {MAX_PAGE}"
            )
        await self.existing(ref)
        segment = await self.store.get_segment(session_id)
        if segment is None or segment.key != ref:
            raise SegmentNotFound(f"no segment {session_id} under {key!r}")
        return await self.store.list_messages(session_id, after_seq=after, limit=limit)

    # -- erasure (export and import: service/session_exchange.py) --------------

    async def delete(self, key: str, caller: Caller, *, owner: str | None = None) -> None:
        ref = caller.key(key, owner=owner)
        async with self.locks.hold(ref):
            await self.erase_held(ref)

    async def erase_held(self, ref: KeyRef) -> None:
        """Erase the key and run the erase hooks; the caller holds the key's lock (the
        retention run, which checks the key is still idle under that lock)."""
        self.threads.drop(ref)
        await self.store.delete_key(ref)
        self.keys_changed()
        for hook in self._erase_hooks:
            await hook(ref)

    def on_erase(self, hook: EraseHook) -> None:
        """`hook(ref)` runs after each erasure of a key, under the key's lock."""
        self._erase_hooks.append(hook)
